"""Runs as a service: the engine's steps driven by RQ jobs over the tree stored in the database.

queues (job ids, enqueue after commit), runs (tree <-> rows, the run lock), steps (start, expand,
record, schedule), reaper (lost jobs), control (create, cancel, pause, resume, extend, fork).
"""
