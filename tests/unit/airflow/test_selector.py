"""Label selectors matched locally, as the API server matches them (airflow_t9k.api.selector)."""

from __future__ import annotations

import pytest

from airflow_t9k.api.selector import parse

LABELS = {"app": "train", "env": "prod", "airflow-t9k.io/run-id": "m_ok"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [("app=train", True), ("app==train", True), ("app=eval", False), ("app!=eval", True), ("app!=train", False),
     ("app", True), ("!app", False), ("team", False), ("!team", True),
     ("env in (prod, staging)", True), ("env notin (prod)", False), ("env in (dev)", False),
     ("app=train,env in (prod, dev),!team", True), ("app=train, env=dev", False),
     ("airflow-t9k.io/run-id=m_ok", True), ("missing!=x", True)],
)  # fmt: skip
def test_label_selectors_match_as_the_api_server_matches(selector, matches):
    assert parse(selector)(LABELS) is matches


@pytest.mark.parametrize("bad", ["app=a=b", "env in prod", "=x"])
def test_a_selector_the_api_server_would_refuse_is_an_error(bad):
    with pytest.raises(ValueError, match="label selector"):
        parse(bad)


def test_no_labels_is_an_empty_set():
    assert parse("!app")(None)
    assert not parse("app")(None)
