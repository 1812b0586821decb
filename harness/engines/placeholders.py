"""The placeholders of an engine description's commands, checked when the file is read.

Commands are argv lists formatted with str.format: `{python}` everywhere, `{run_id}` where a
run is named, `{tool_call_id}` in approve/reject. A brace the author meant literally (an awk
program, a JSON argument) is written doubled, `{{` and `}}`, as str.format reads it. Anything
else, a lone brace or an unknown name, is refused here, naming the command and the argument,
instead of a KeyError when a trial first runs the command.
"""

from __future__ import annotations

import string

# Which placeholders each command is formatted with (harness/engines/commands.py).
_RUN = frozenset({"python", "run_id"})
ALLOWED: dict[str, frozenset[str]] = {
    "migrate": frozenset({"python"}),
    "worker": frozenset({"python"}),
    "submit": frozenset({"python"}),
    "status_server": frozenset({"python"}),
    "status": _RUN,
    "export": _RUN,
    "cancel": _RUN,
    "purge": _RUN,
    "approve": _RUN | {"tool_call_id"},
    "reject": _RUN | {"tool_call_id"},
    "version": frozenset({"python"}),
}
_HINT = "write {{ and }} for a literal brace"


def check(command: str, argv: list[str]) -> None:
    """ValueError naming `command[i]` when an argument is not a template it can fill."""
    allowed = ALLOWED[command]
    for position, part in enumerate(argv):
        where = f"{command}[{position}]"
        try:
            fields = list(string.Formatter().parse(part))
        except ValueError as error:  # a lone { or }
            raise ValueError(f"{where}: {error}; {_HINT}") from None
        for _, name, spec, conversion in fields:
            if name is None:
                continue
            known = ", ".join(f"{{{n}}}" for n in sorted(allowed))
            if name not in allowed:
                raise ValueError(
                    f"{where}: unknown placeholder {{{name}}}; {command} knows {known}; {_HINT}"
                )
            if spec or conversion:
                raise ValueError(f"{where}: {{{name}}} takes no format spec or conversion")
