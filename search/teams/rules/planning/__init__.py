"""How the rules team plays the search: recipes (what was applied), the move catalogue and its fixes (moves, combos),
when to stop (stop), failures remembered per tree (failures), the anchored spans a move changes (anchoring) and the
plan, code and debug roles (roles). Pure: reads plain Facts and source text, never a graph."""
