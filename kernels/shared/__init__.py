"""What both sides of the harness import: the parent (kernels.parent) and the isolated child (kernels.child).

Pure data, checks and arithmetic both sides need to agree on: output digests and their comparison (digest,
correctness), the timing witness and statistics (witness, stats), the static source checks (static_check,
source_ast), the op list (ops), the profile's shape (profile), the device facts (devices, device_busy), the process
tree of a child (process_tree), the limits a child enters (limits) and the harness's errors (errors). Nothing here
imports kernels.parent or kernels.child.
"""
