"""The test suite, one package: tests/<path>/test_<module>.py tests explorer/<path>/<module>.py;
cross-cutting tests (the zoo, the differential fuzz, properties, bad input, notebooks) sit here
at the top; tests/corpora/ holds the programs they share."""
