"""The web UI's pages: new run, runs list, run page with the live tree, node inspector, compare."""
