"""The app's websockets: the guarded consumer every socket builds on (guard.py: credentials re-checked while open,
a per-user slot, the channel layer's failures answered with an error frame), their authentication (auth.py: session
or API token), the per-user slots (slots.py) and the operators' diagnostics socket (diagnostics.py)."""
