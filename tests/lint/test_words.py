"""TK201 counts words the way each script writes them: whitespace-separated words in
alphabetic scripts, and runs of Chinese ideographs or Japanese kana at two characters a word,
so a Chinese sentence is not one word (issue 11, "what hurt" 10)."""

from __future__ import annotations

import math
import string

from hypothesis import given
from hypothesis import strategies as st

from toolkeeper.contract.model import ToolContract
from toolkeeper.lint import count_words, lint_contract
from toolkeeper.lint.surface import CJK_CHARACTERS_PER_WORD

_LATIN_WORD = st.text(string.ascii_letters + string.digits, min_size=1, max_size=12)
_HAN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
_HAN_RUN = st.text(_HAN, min_size=1, max_size=40)
_KANA_RUN = st.text(st.characters(min_codepoint=0x3041, max_codepoint=0x30FA), min_size=1)
_CJK_PUNCTUATION = st.sampled_from("，。、：；！？（）《》「」【】")
_SPACES = st.sampled_from([" ", "  ", "\n", "\t", "\u3000"])


@given(st.lists(_LATIN_WORD, max_size=30), _SPACES)
def test_alphabetic_words_are_separated_by_whitespace(words: list[str], space: str) -> None:
    assert count_words(space.join(words)) == len(words)


@given(_HAN_RUN)
def test_a_run_of_ideographs_counts_two_characters_a_word(run: str) -> None:
    assert count_words(run) == math.ceil(len(run) / CJK_CHARACTERS_PER_WORD)


@given(_KANA_RUN)
def test_kana_count_like_ideographs(run: str) -> None:
    assert count_words(run) == math.ceil(len(run) / CJK_CHARACTERS_PER_WORD)


@given(st.text(max_size=60), st.text(max_size=60), _SPACES)
def test_words_of_two_texts_add_up(first: str, second: str, space: str) -> None:
    assert count_words(first + space + second) == count_words(first) + count_words(second)


@given(_HAN_RUN, _CJK_PUNCTUATION, _HAN_RUN)
def test_cjk_punctuation_ends_a_run_and_is_no_word(before: str, mark: str, after: str) -> None:
    assert count_words(before + mark + after) == count_words(before) + count_words(after)
    assert count_words(mark * 3) == 0


@given(_LATIN_WORD, _HAN_RUN)
def test_latin_inside_a_chinese_sentence_is_a_word_of_its_own(word: str, run: str) -> None:
    """``通过IP地址获取位置信息``: the Latin acronym is one word, each Chinese run its own."""
    assert count_words(run + word + run) == 2 * count_words(run) + 1


@given(_HAN_RUN, _HAN)
def test_a_longer_run_never_has_fewer_words(run: str, extra: str) -> None:
    assert count_words(run + extra) >= count_words(run)


def described(text: str) -> ToolContract:
    return ToolContract(id="get_location", description=text, side_effect="none")


def test_a_chinese_description_of_a_real_server_is_long_enough() -> None:
    """Baidu Maps MCP server (tests/lint/catalogs/baidu-map-mcp.json), map_ip_location and
    map_distance_matrix: 6 and 10 words, not 1."""
    for text in ("通过IP地址获取位置信息", "计算多个出发地和目的地的距离和路线用时"):
        assert "TK201" not in [f.code for f in lint_contract(described(text))]


def test_a_short_chinese_description_is_as_short_as_its_english() -> None:
    """map_geocode says 地理编码服务 (geocoding service): three words, flagged like the two
    English ones."""
    for text in ("地理编码服务", "Geocoding service"):
        (found,) = [f for f in lint_contract(described(text)) if f.code == "TK201"]
        assert "too short" in found.message
    (chinese,) = [f for f in lint_contract(described("地理编码服务")) if f.code == "TK201"]
    assert "is 3 words" in chinese.message
