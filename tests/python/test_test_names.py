# ctest learns the C++ test cases from Catch2's listing and splits names at ';' (a CMake list separator),
# so a test case whose name holds ';' silently runs nothing under ctest. Keep such names out.
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_catch2_test_name_contains_a_semicolon():
    bad = [f"{path.relative_to(TESTS)}:{n}" for path in sorted(TESTS.rglob("*_test.cpp"))
           for n, line in enumerate(path.read_text().splitlines(), 1)
           if (m := re.search(r'TEST_CASE\("([^"]*)"', line)) and ";" in m.group(1)]
    assert not bad, "test names with ';' (use ',' instead): " + ", ".join(bad)
