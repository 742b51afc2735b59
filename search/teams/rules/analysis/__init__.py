"""What the rules team knows about a problem: its source loaded (problem), the forward traced with shapes (forward),
the fusions found in it (kinds: the typed fusions; graph, ops, reductions, rowwise, gemms: the finders), the
convolutions' layouts (convs) and the plain Facts the planning side reads (facts). Child side except facts."""
