"""Helpers the tests share: job kinds, worker processes, console data and users."""
