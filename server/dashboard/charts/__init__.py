"""Small server-side SVG charts: each function takes plain numbers and returns escaped SVG markup."""
