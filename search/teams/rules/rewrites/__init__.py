"""Exact rewrites of the traced forward, each checked on its shapes: the passes in run order (passes), the graph
editing toolkit they share (editing), and the rules: weights folding (folding), algebra (algebra), conv-to-window-sums
(window_sums, with what it reads of a conv's geometry in conv_geometry). Child side."""
