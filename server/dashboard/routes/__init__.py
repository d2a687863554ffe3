"""The dashboard's pages, one module per part of the site."""
