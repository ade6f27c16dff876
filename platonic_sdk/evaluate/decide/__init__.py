"""The default's decision protocol as tested code (docs/method.md sec. 15.1): a protocol file (`protocol`), its
replicates measured (`measure`), their figures (`figures`), criteria, choice and hold judged (`judge`), the git
record that confirmation seeds ran from a committed protocol (`provenance`), the runner and its report (`runner`,
`tables`); `python -m platonic_sdk.evaluate.decide PROTOCOL.json` runs it."""

from ...lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {
    ".protocol": ["Protocol", "Candidate", "Criterion", "load_protocol", "protocol_from"],
    ".judge": ["judge", "choose", "hold", "ranking"],
    ".runner": ["decide", "markdown"],
})
