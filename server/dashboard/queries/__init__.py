"""Read-only queries behind the dashboard pages; every tenant-owned row is filtered by tenant."""
