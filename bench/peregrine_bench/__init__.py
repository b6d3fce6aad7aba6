"""bench/run.py's implementation: Peregrine side by side with nginx, H2O and lighttpd."""
