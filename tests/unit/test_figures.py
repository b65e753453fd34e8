"""C13: render_report keeps only the prose numbers that some figure holds (in any natural rendering), then lists
the figures the reply relies on."""
import re
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.strategies import examples
from worker import figures
from worker.figures import DASH, Figure, check, numbers_in, render_report, scrub
from worker.money import Money, ShopFormat

VANILLA = Figure("vanilla on hand", 2, "tubs", "vanilla")
SHOP = [VANILLA, Figure("vanilla reorder point", 8, "tubs", "vanilla"),
        Figure("vanilla unit cost", Money(300), "", "vanilla"),
        Figure("chocolate on hand", 12, "tubs", "chocolate"),
        Figure("chocolate unit cost", Money(250), "", "chocolate"),
        Figure("cones on hand", 1800, "cones", "cones"),
        Figure("vanilla sold per day", 3.53, "tubs a day", "vanilla"),
        Figure("today", date(2026, 12, 5)), Figure("now", datetime(2026, 12, 5, 21, 38, tzinfo=ZoneInfo("UTC")))]


def test_matching_number_kept_and_figures_block_appended():
    text = render_report("Vanilla: 2 tubs left.", [VANILLA])
    assert text == "Vanilla: 2 tubs left.\n\nFigures:\n- vanilla on hand: 2 tubs"


def test_unmatched_number_replaced():
    assert render_report("vanilla: 7", [VANILLA]) == f"vanilla: {DASH}"   # nothing cited, no item asked about
    assert render_report("vanilla: 7", [VANILLA], question="vanilla?") == (
        f"vanilla: {DASH}\n\nFigures:\n- vanilla on hand: 2 tubs")


def test_the_issue_example_keeps_every_tool_backed_number():
    figures = [*SHOP, Figure("vanilla quantity", 6, "tubs", "vanilla"),
               Figure("vanilla cost", Money(1800), "", "vanilla"),
               Figure("brief", time(8, 30))]
    prose = ("Vanilla is at 2 tubs, below its reorder point of 8, so it will not last the weekend. Ordering 6 tubs "
             "would cost $18.00. Today is 2026-12-05, the brief runs at 08:30.")
    assert scrub(prose, figures) == prose
    assert scrub(prose, SHOP) == prose.replace("6 tubs", f"{DASH} tubs").replace("$18.00", f"${DASH}").replace(
        "08:30", DASH)   # negative control: the same prose without those records loses exactly those numbers


@pytest.mark.parametrize("rendering", ["$3.00", "3.00", "3", "3.00 USD", "USD 3", "300 cents", "300 ct", "300¢",
                                       "$3"])
def test_a_money_figure_matches_every_natural_rendering(rendering):
    assert scrub(f"vanilla costs {rendering} a tub", SHOP) == f"vanilla costs {rendering} a tub"


@pytest.mark.parametrize("rendering", ["300 tubs", "$300", "30 cents", "3.01", "$0.30"])
def test_a_money_figure_matches_no_other_amount(rendering):
    assert DASH in scrub(f"vanilla costs {rendering}", SHOP)


@pytest.mark.parametrize("rendering", ["2", "2.0", "2 tubs", "2tubs", "1,800 cones", "1800"])
def test_a_count_matches_its_renderings(rendering):
    assert scrub(f"we have {rendering}", SHOP) == f"we have {rendering}"


@pytest.mark.parametrize("rendering", ["3.53", "3.5", "about 4", "3.53 tubs a day"])
def test_a_fraction_matches_when_rounded_to_the_places_written(rendering):
    assert scrub(f"sells {rendering}", SHOP) == f"sells {rendering}"


@pytest.mark.parametrize("rendering", ["3.6", "3.54", "5"])
def test_a_fraction_rounded_wrongly_is_blanked(rendering):
    assert scrub(f"sells {rendering}", SHOP) == f"sells {DASH}"


def test_a_half_may_round_either_way():
    figures = [Figure("rate", 0.25)]
    assert scrub("0.2 or 0.3, not 0.4", figures) == f"0.2 or 0.3, not {DASH}"


@pytest.mark.parametrize("rendering", ["2026-12-05", "5 December 2026", "Saturday 5 December", "December 5th, 2026",
                                       "Dec 5", "5 Dec", "05/12/2026", "2026-12-05 21:38", "21:38", "9:38 pm",
                                       "2026"])
def test_dates_and_times_match_in_iso_words_and_the_shops_numeric_form(rendering):
    fmt = ShopFormat("GBP", "en_GB", "Europe/London")
    assert scrub(f"as of {rendering}.", SHOP, fmt) == f"as of {rendering}."


@pytest.mark.parametrize("rendering, expected", [
    ("2026-12-06", DASH), ("6 December 2026", f"{DASH} December 2026"), ("5 December 2025", f"{DASH} December {DASH}"),
    ("12/05/2026", DASH), ("08:30", DASH), ("8pm", DASH), ("2026-12-05 08:30", DASH)])
def test_a_date_or_time_no_figure_holds_is_blanked(rendering, expected):
    fmt = ShopFormat("GBP", "en_GB", "Europe/London")
    assert scrub(f"as of {rendering}.", SHOP, fmt) == f"as of {expected}."


@pytest.mark.parametrize("locale", ["en_GB", "es_ES"])
def test_a_spanish_date_in_words_is_kept_and_a_wrong_one_blanked(locale):
    """Issue 27: Spanish month names in the matcher, so a Spanish reply's date is not blanked."""
    fmt = ShopFormat("EUR", locale, "Europe/Madrid")
    for rendering in ("5 de diciembre", "sábado 5 de diciembre de 2026", "5 diciembre 2026"):
        assert scrub(f"llega el {rendering}.", SHOP, fmt) == f"llega el {rendering}."
    # negative control: another day, or another year, is blanked
    assert scrub("llega el 6 de diciembre.", SHOP, fmt) == f"llega el {DASH} de diciembre."
    assert scrub("llega el 5 de diciembre de 2025.", SHOP, fmt) == f"llega el {DASH} de diciembre de {DASH}."
    # the formatter writes what the matcher reads
    from worker.money import day_words
    assert day_words(date(2026, 12, 5), "es") == "sábado 5 de diciembre de 2026"
    assert ShopFormat("EUR", "es_ES").date_words(date(2026, 12, 5)) == "sábado 5 de diciembre de 2026"
    assert scrub(f"llega el {day_words(date(2026, 12, 5), 'es', year=False)}.", SHOP, fmt) == \
        "llega el sábado 5 de diciembre."


def test_an_ordinal_matches_the_day_of_a_date_figure():
    assert scrub("until the 5th, not the 6th", SHOP) == f"until the 5th, not the {DASH}th"


def test_a_us_shop_reads_numeric_dates_month_first():
    assert scrub("on 12/05/2026", SHOP, ShopFormat("USD", "en_US")) == "on 12/05/2026"
    assert scrub("on 05/12/2026", SHOP, ShopFormat("USD", "en_US")) == f"on {DASH}"


def test_a_decimal_comma_shop_reads_its_own_numbers():
    fmt = ShopFormat("EUR", "de_DE", "Europe/Berlin")
    figures = [Figure("vanilla unit cost", Money(300, "EUR"), "", "vanilla"), Figure("cones", 1800, "cones", "cones"),
               Figure("today", date(2026, 12, 5))]
    prose = "Vanille kostet 3,00 € (3 €, 300 Cent), 1.800 Waffeln, Stand 5. Dezember und 05.12.2026."
    assert scrub(prose, figures, fmt) == prose
    assert scrub("3,01 € und 1.801", figures, fmt) == f"{DASH} € und {DASH}"
    assert fmt.money(Money(123456, "EUR")) == "1.234,56\u00a0€"


def test_the_block_shows_the_cited_figures_and_those_of_the_items_asked_about():
    text = render_report("Vanilla: 2 tubs. Chocolate costs $2.50.", SHOP, question="vanilla and chocolate?")
    block = text.split("Figures:\n", 1)[1].splitlines()
    assert block == ["- vanilla on hand: 2 tubs", "- vanilla reorder point: 8 tubs", "- vanilla unit cost: $3.00",
                     "- chocolate on hand: 12 tubs", "- chocolate unit cost: $2.50",
                     "- vanilla sold per day: 3.53 tubs a day"]
    text = render_report("Chocolate costs $2.50.", SHOP, question="price?")
    assert text.endswith("Figures:\n- chocolate unit cost: $2.50")   # only what the prose cites


def test_an_asked_items_repeated_label_shows_once_unless_cited():
    counts = [Figure("chocolate counted", n, "tubs", "chocolate") for n in (16, 20, 7)]
    text = render_report("Chocolate was counted at 7 tubs.", counts, question="chocolate counts?")
    assert text.endswith("Figures:\n- chocolate counted: 16 tubs\n- chocolate counted: 7 tubs")


def test_a_value_shared_by_several_items_cites_the_item_of_its_sentence():
    figures = [Figure("vanilla on hand", 2, "tubs", "vanilla"), Figure("mint on hand", 2, "tubs", "mint")]
    assert render_report("Mint: 2 tubs.", figures).endswith("Figures:\n- mint on hand: 2 tubs")
    assert render_report("We have 2 tubs.", figures).endswith("- vanilla on hand: 2 tubs\n- mint on hand: 2 tubs")


def test_a_reply_without_a_number_has_no_block():
    assert render_report("Vanilla is low.", SHOP, question="how is vanilla?") == "Vanilla is low."


def test_check_counts_numbers_and_blanks():
    checked = check("2 tubs, 7 tubs, on 2026-12-05", SHOP)
    assert (checked.numbers, checked.blanked) == (3, 1)


def test_no_figures_gives_prose_only_and_every_number_replaced():
    assert render_report("Order 6 tubs for 1,800 cents.", []) == f"Order {DASH} tubs for {DASH} cents."
    assert render_report("Nothing to report.", []) == "Nothing to report."


def test_figures_deduplicated_in_first_seen_order():
    figures = [Figure("b", 1), VANILLA, Figure("b", 1), Figure("a", 2.0, "x"), VANILLA]
    text = render_report("", figures, show_all=True)
    assert text == "Figures:\n- b: 1\n- vanilla on hand: 2 tubs\n- a: 2 x"


def test_same_label_different_value_both_listed():
    text = render_report("2 or 5", [Figure("vanilla on hand", 2, "tubs"), Figure("vanilla on hand", 5, "tubs")])
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
        ("on 2026-11-30", [2026, 11, 30], f"on {DASH}"),              # a date matches a date figure, not counts
        ("at 07:30", [7, 30], f"at {DASH}"),                          # a time matches a time figure
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
    text = render_report("", [Figure("a", 3.0), Figure("b", 2.25, "kg")], show_all=True)
    assert text == "Figures:\n- a: 3\n- b: 2.25 kg"


def test_ids_are_never_listed_as_figures_but_the_values_the_prose_cites_are():
    """C13: a draft's, proposal's or order's number is an id. The registry marks it (`record_id`) and the block leaves
    it out, even for the item asked about; a count that several of the item's figures share is listed once."""
    from worker.tools.registry import typed_result
    result = {"item": "vanilla", "unit": "tubs", "on_hand": 2, "position": 2, "draft_id": 2, "proposal_id": 2,
              "open_proposal": 2, "order": 2, "quantity": 6}
    _, figures = typed_result(result, ShopFormat())
    assert {f.label for f in figures if f.record_id} == {"vanilla draft id", "vanilla proposal id",
                                                     "vanilla open proposal", "vanilla order"}
    asked = render_report("Vanilla: 2 tubs on hand.", figures, question="how much vanilla")
    cited = render_report("Vanilla: 2 tubs on hand.", figures, question="stock")
    for text in (asked, cited):
        assert "id" not in text.split("Figures:")[1] and "order:" not in text and "open proposal" not in text
    assert cited.endswith("Figures:\n- vanilla on hand: 2 tubs")       # cited once, not on hand = position
    # negative control: the same figures unmarked are listed
    plain = [Figure(f.label, f.value, f.unit, f.subject) for f in figures]
    assert "vanilla draft id: 2" in render_report("Vanilla: 2 tubs.", plain, question="vanilla")


def test_a_record_number_stands_only_when_the_run_returned_it():
    from worker.figures import DASH, Figure, render_report
    figures = [Figure("proposal id", 2, record_id=True), Figure("vanilla quantity", 6, "tubs", "vanilla")]
    text = render_report("Proposal #2 orders 6 tubs; proposal #3 and 2 proposals are open.", figures)
    assert text.startswith(f"Proposal #2 orders 6 tubs; proposal #{DASH} and {DASH} proposals are open.")
    assert "proposal id" not in text and "- vanilla quantity: 6 tubs" in text
    assert render_report("See #2.", figures) == "See #2."          # an id is no number: no Figures block for it


# ---- the token scan: a word without a digit is not matched, and that changes nothing ---------------------------
# The identifier branch as it was: every word starting with a letter was matched (and handed back unchanged).
EVERY_WORD_IDENT = r"(?P<ident>(?<!\w)[^\W\d_]\w*(?:(?<=\d)\.\d+)*)"
PIECES = ["vanilla", "K7", "r12.1", "x", "_", "ab_c1", "2", "12", "3.5", ".5", "1,800", "3,50", "1.800", "2026",
          "2026-12-05", "05/12/2026", "5.12.26", "08:30", "8pm", "8.30am", "5th", "Dec", "December", "5. Dezember",
          "#2", "&#3", "−4", "-", "¢", "cents", "²", "٣", "x²", "İ", " ", " ", "  ", ".", ",", ":", "/", "\n", "?", "!"]


def scan(pattern, prose: str) -> list[tuple[str | None, int, int]]:
    return [(m.lastgroup, m.start(), m.end()) for m in pattern.finditer(prose) if m.lastgroup != "ident"]


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), st.booleans())
def test_the_scan_finds_the_same_numbers_as_when_every_word_was_an_identifier(prose: str, comma: bool):
    """check's replacer gave an identifier back unchanged, so the same non-identifier tokens at the same places make
    the same check; a prose without a digit has none (check returns it at once)."""
    pattern = figures._tokens(ShopFormat(locale="de_DE") if comma else ShopFormat())
    ident = re.search(r"\(\?P<ident>.*\)\n", pattern.pattern)
    assert ident is not None
    oracle = re.compile(pattern.pattern.replace(ident.group(0), EVERY_WORD_IDENT + "\n"), re.VERBOSE)
    assert scan(pattern, prose) == scan(oracle, prose)
    if not re.search(r"\d", prose):
        assert scan(oracle, prose) == [] and check(prose, SHOP) == figures.Checked(prose, (), 0, 0)


def test_negative_control_an_identifier_branch_taking_only_letters_lets_glued_digits_through():
    """The differential check above catches a branch that differs: one that stops at the first digit leaves `K7`'s
    7 to be read as a number."""
    pattern = figures._tokens(ShopFormat())
    ident = re.search(r"\(\?P<ident>.*\)\n", pattern.pattern)
    assert ident is not None
    letters_only = re.compile(pattern.pattern.replace(ident.group(0), r"(?P<ident>(?<!\w)[^\W\d_]+)" + "\n"),
                              re.VERBOSE)
    oracle = re.compile(pattern.pattern.replace(ident.group(0), EVERY_WORD_IDENT + "\n"), re.VERBOSE)
    assert scan(letters_only, "see K7") != scan(oracle, "see K7")
