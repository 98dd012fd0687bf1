"""The program corpora the tests share: graphs.py (seeds, catalogue, models: every structural
test), ir_programs.py (a hypothesis strategy of random IR programs), zoo.py (realistic user
programs), memory_programs.py (random programs that need a split), fuzz_programs.py (the
differential fuzz's random JAX programs and its runner), hlo_mutations.py (mutated HLO
dumps for the importer's fuzz)."""
