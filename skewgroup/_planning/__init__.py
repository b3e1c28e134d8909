"""Planning: the sample's sketches and the estimate ``plan="auto"`` chooses a plan from."""
