"""The Warning headers of a response, against kube-apiserver v1.36's warning recorder
(k8s.io/apiserver/pkg/endpoints/filters/warning.go and its warning_test.go, whose cases these
follow at the real limits: 4,096 runes in all, 256 a text once truncating)."""

from __future__ import annotations

from memop.testing.apiserver.warningheaders import warning_headers


def test_texts_are_quoted_deduplicated_and_refused_as_new_warning_header_does() -> None:
    assert warning_headers(["a", "", 'q"uote', "back\\slash", "a", "new\nline", "del\x7f", "ünï"]) == [
        '299 - "a"',
        '299 - "q\\"uote"',
        '299 - "back\\\\slash"',
        '299 - "ünï"',
    ]
    # A lone surrogate (a JSON "\ud800") is U+FFFD, as Go's JSON decoder makes it.
    assert warning_headers(["\ud800"]) == ['299 - "\ufffd"']


def test_texts_go_whole_until_4096_runes_then_every_one_is_cut_to_256() -> None:
    a, b, c = "a" * 2000, "b" * 2000, "c" * 2000
    assert warning_headers([a, b]) == [f'299 - "{a}"', f'299 - "{b}"']
    # The third would pass 4,096 runes: all three are sent again, cut to their first 256 runes.
    cut = [f'299 - "{x * 256}"' for x in "abc"]
    assert warning_headers([a, b, c]) == cut
    # Once truncating, later texts are cut too, and none is added once 4,096 runes went out.
    more = [f"{i:04}" + "d" * 300 for i in range(20)]
    headers = warning_headers([a, b, c, *more])
    assert headers[:3] == cut
    assert headers[3] == f'299 - "{more[0][:256]}"'
    # 3 + 13 texts of 256 runes reach 4,096; the next ones are dropped.
    assert len(headers) == 16
    # A dropped text (control character) takes no room but is still deduplicated.
    assert warning_headers(["x\ny", "x\ny", "z"]) == ['299 - "z"']
