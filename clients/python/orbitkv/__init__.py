"""OrbitKV Python client (stdlib only)."""
