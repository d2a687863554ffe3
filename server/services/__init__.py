"""The service layer: what the API routes (server/api/routes) and the dashboard routes
(server/dashboard/routes) both do, as plain functions over a session. Routes turn HTTP
into calls of these and their results into responses; no route calls another route, and
the queries live here (and, for the dashboard's read-only pages, in dashboard/queries).
Errors are `ServiceError`s carrying the HTTP status that the app's handler gives them.
"""
