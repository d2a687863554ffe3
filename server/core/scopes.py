"""A token's scopes: here apart from server/core/security.py, which imports SQLAlchemy, so
that the command line names them without loading the database layer."""

READ, WRITE = "read", "write"
SCOPES = (READ, WRITE)
