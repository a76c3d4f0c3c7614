"""One-off explorations run on lent GPU machines: kept so that every figure they gave has its
command. Not benchmarks of the harness (no smoke tests); their results are in
benchmarks/results/ with the command that made them."""
