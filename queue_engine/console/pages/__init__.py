"""What each console page shows: the context its template renders, built from the
database and the request's query string alone.

A page's view (`console/views/`) renders it over HTTP; its socket (`consumers` for a job,
a flow, a queue and the overview; `live_pages` for the lists) renders the same
partials from the same context whenever something may have changed. Both import from
here, and nothing here imports a view or a socket.
"""
