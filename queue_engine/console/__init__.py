"""The operations console: pages, live fragments over websockets, the LISTEN bridge."""
