"""C13: render_report keeps only the prose numbers that some figure holds, then lists the figures."""
import pytest

from worker.figures import DASH, Figure, numbers_in, render_report, scrub

VANILLA = Figure("vanilla on hand", 2, "tubs")


def test_matching_number_kept_and_figures_block_appended():
    text = render_report("Vanilla: 2 tubs left.", [VANILLA])
    assert text == "Vanilla: 2 tubs left.\n\nFigures:\n- vanilla on hand: 2 tubs"


def test_unmatched_number_replaced():
    assert render_report("vanilla: 7", [VANILLA]) == f"vanilla: {DASH}\n\nFigures:\n- vanilla on hand: 2 tubs"


def test_no_figures_gives_prose_only_and_every_number_replaced():
    assert render_report("Order 6 tubs for 1,800 cents.", []) == f"Order {DASH} tubs for {DASH} cents."
    assert render_report("Nothing to report.", []) == "Nothing to report."


def test_figures_deduplicated_in_first_seen_order():
    figures = [Figure("b", 1), VANILLA, Figure("b", 1), Figure("a", 2.0, "x"), VANILLA]
    text = render_report("", figures)
    assert text == "Figures:\n- b: 1\n- vanilla on hand: 2 tubs\n- a: 2 x"


def test_same_label_different_value_both_listed():
    text = render_report("x", [Figure("vanilla on hand", 2, "tubs"), Figure("vanilla on hand", 5, "tubs")])
    assert text.endswith("- vanilla on hand: 2 tubs\n- vanilla on hand: 5 tubs")


@pytest.mark.parametrize(
    "prose, values, expected",
    [
        ("total 2,600 cents", [2600], "total 2,600 cents"),           # thousands separator matches
        ("total 2600 cents", [2600.0], "total 2600 cents"),           # int/float compare by value
        ("cost 2.50 each", [2.5], "cost 2.50 each"),
        ("cost 2.5 each", [2], f"cost {DASH} each"),                  # 2.5 is not 2: the whole number goes
        ("1,234,567 scoops", [1234567], "1,234,567 scoops"),
        ("12,34", [12, 34], "12,34"),                                 # not a thousands group: two numbers
        ("12,34", [1234], f"{DASH},{DASH}"),
        ("2,600.50 total", [2600.5], "2,600.50 total"),
        ("at -2 tubs", [2], f"at {DASH} tubs"),                       # minus two is not two
        ("at -2 tubs", [-2], "at -2 tubs"),
        ("2-3 tubs", [2, 3], "2-3 tubs"),                             # a hyphen, not a sign
        ("sugar-3", [3], "sugar-3"),
        ("only .5 left", [0.5], "only .5 left"),
        ("6tubs and 2kg", [6], f"6tubs and {DASH}kg"),                # glued after: checked, letters stay
        ("2x300", [2], f"2x{DASH}"),                                  # a letter glued to a digit is no identifier
        ("see r12.1 and K7, C13", [], "see r12.1 and K7, C13"),        # identifiers are not numbers
        ("vanilla: 7.", [2], f"vanilla: {DASH}."),                    # sentence full stop is not a decimal
        ("on 2026-11-30", [], f"on {DASH}-{DASH}-{DASH}"),            # dates are numbers too
        ("at 07:30", [7, 30], "at 07:30"),
        ("Vanilla ٢ tubs", [2], "Vanilla ٢ tubs"),                    # any script's digits
        ("six tubs", [], "six tubs"),                                  # number words are not detected
        ("(−4)", [-4], "(−4)"),
    ],
)
def test_number_edge_cases(prose, values, expected):
    assert scrub(prose, [Figure("f", v) for v in values]) == expected


def test_numbers_in_lists_what_is_checked():
    assert numbers_in("r12.1: vanilla 2, 1,800 cents, K7, -3, 2x4") == ["2", "1,800", "-3", "2", "4"]


def test_booleans_and_non_finite_values_match_nothing():
    assert scrub("1 and 0", [Figure("flag", True), Figure("nan", float("nan"))]) == f"{DASH} and {DASH}"


def test_float_figure_rendering():
    text = render_report("", [Figure("a", 3.0), Figure("b", 2.25, "kg")])
    assert text == "Figures:\n- a: 3\n- b: 2.25 kg"
