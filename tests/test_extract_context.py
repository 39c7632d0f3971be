"""Extraction keeps context: a named speaker stays attached to what they said, a turn's dependent
sentences stay together, first-person plans are statements; greetings and bare questions are
still skipped."""

from __future__ import annotations

import pytest

from memcli.services.extract import heuristic_extract


def texts(text: str) -> list[str]:
    return [f.text for f in heuristic_extract(text).facts]


@pytest.mark.parametrize("turn", [
    "Joanna: I'm going to make it for my family this weekend.",
    "Nate: I see them at least once a week.",
    "Maria Lopez: I'm moving the release to Thursday, my team agreed.",
])
def test_a_named_speakers_statement_is_kept_with_the_name(turn):
    assert texts(turn) == [turn]


@pytest.mark.parametrize("turn", [
    "Melanie: Hey Caroline! Good to see you! I'm swamped with the kids & work. What's up with you?",
    "Melanie: 5 years already! Time flies- feels like just yesterday I put this dress on!",
    "Melanie: Thanks! They were scared but we reassured them. They're tough kids.",
    "Melanie: Yeah, I painted that lake sunrise last year! It's special to me.",
])
def test_a_turn_with_something_to_keep_is_kept_whole_as_one_fact(turn):
    assert texts(turn) == [turn]


def test_a_chat_of_several_speakers_keeps_each_attribution():
    chat = ("Caroline: Hey Mel! Good to see you! How have you been?\n"
            "Melanie: I started pottery classes last month. They run every Tuesday evening.\n"
            "Caroline: Is it expensive?\n"
            "Caroline: I adopted a second dog, her name is Luna.\n")
    assert texts(chat) == ["Melanie: I started pottery classes last month. They run every Tuesday evening.",
                           "Caroline: I adopted a second dog, her name is Luna."]


@pytest.mark.parametrize("turn", [
    "Caroline: Hey Mel! Good to see you! How have you been?",
    "Melanie: Wow, Caroline! What kinda jobs are you thinkin' of? Anything that stands out?",
    "Caroline: Thanks, Melanie! That's really sweet.",
])
def test_greetings_and_bare_questions_are_still_skipped(turn):
    ex = heuristic_extract(turn)
    assert ex.facts == [] and ex.skipped >= 1


def test_labels_that_are_not_people_are_not_speakers():
    assert texts("Note: the staging database is reset every Sunday at 02:00 UTC.") == [
        "Note: the staging database is reset every Sunday at 02:00 UTC."]
    # an assistant's plan to act is still filler; the role label is still dropped
    assert texts("assistant: I'm going to look into it.") == []
    assert texts("user: We deploy with make release from the main branch.") == [
        "We deploy with make release from the main branch."]
