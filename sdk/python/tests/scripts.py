"""The mock model's scripts the tests share."""

BASIC = r"""
responses:
  - match: { last_user_contains: "read the notes" }
    text: "Let me read the file."
    tool_calls:
      - { id: r1, name: read, arguments: { path: notes.txt } }
  - match: { last_user_contains: "read the notes" }
    text: "The notes say hello."
  - match: { last_user_contains: "remember the word" }
    text: "I will remember: pelican."
  - match: { last_user_contains: "which word" }
    text: "The word was pelican."
  - match: { last_user_contains: "take forever" }
    behaviour: stall
    text: "never arrives"
  - match: { last_user_contains: "take forever" }
    behaviour: stall
    text: "never arrives"
  - match: { last_user_contains: "take forever" }
    behaviour: stall
    text: "never arrives"
"""

ASKING = r"""
responses:
  - match: { last_user_contains: "run the check" }
    tool_calls:
      - { id: b1, name: bash, arguments: { command: "echo checked-by-keel" } }
  - match: { last_user_contains: "run the check" }
    text: "The check ran."
  - match: { last_user_contains: "clean up" }
    tool_calls:
      - { id: d1, name: bash, arguments: { command: "echo cleaned-by-keel" } }
  - match: { last_user_contains: "clean up" }
    text: "I did not clean up."
  - match: { last_user_contains: "ask me" }
    tool_calls:
      - id: q1
        name: ask_user_question
        arguments:
          questions:
            - { id: lang, question: "Which language?", options: [ { label: Rust }, { label: Go } ] }
            - { id: name, question: "What name?" }
  - match: { last_user_contains: "ask me" }
    text: "Noted your answers."
"""
