"""A bounded, repeatable sample of benchmarks/fuzz.py: generated and mutated programs (and
notebooks) through lint and fix, round by round. The full runs are `python benchmarks/fuzz.py N`."""

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import fuzz  # noqa: E402

SAMPLE = 60


def test_sample_of_fuzzed_programs_holds():
    report = fuzz.run(SAMPLE, seed=13, jobs=1, timeout=300)
    assert report.tried == SAMPLE
    assert dict(report.failures) == {}, report.examples
    assert report.held + report.timeouts + report.skipped == SAMPLE
    assert report.fixed > 0  # the sample reaches the fix checks, not only the linting


def test_sample_covers_every_kind_of_program():
    kinds = {fuzz.program(13, i)[0] for i in range(SAMPLE)}
    assert kinds == {"hypothesmith", "mutant", "notebook"}


def test_mutants_are_repeatable_and_differ_from_their_fixture():
    assert fuzz.program(13, 7) == fuzz.program(13, 7)
    originals = {text.encode("utf-8") for text in fuzz.seed_programs()}
    assert any(fuzz.program(13, i)[1] not in originals for i in range(5))
