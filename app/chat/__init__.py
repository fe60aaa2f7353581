"""`hermes chat`: a terminal client of a running Hermes, through its public HTTP API only."""
