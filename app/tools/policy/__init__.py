"""What the runtime allows, whatever the model asks: the guards a tool call passes, in order.

1. `offered`: the tool exists and is in this turn's offered set (or the customer confirmed it).
2. Arguments validate (app/tools/validation.py) and per-call rules pass (app/tools/rules.py).
   `precheck`: the tool's own check says it would not refuse (a refund of a cancelled order
   is answered at once, never put to an operator first).
3. `history`: rules over what was already done (cumulative limits, sequences), fail closed.
4. `taint`: after untrusted content entered the conversation, actions need an operator.
5. `confirm`: tools marked `confirm` run only after the customer said yes in the next turn.
6. Approval by an operator (app/tools/approvals.py) when any rule above asks for one.

The model proposes; these decide. Each guard is a small function over the call, the tool's
declaration and the turn's `TurnPolicy`; the executor runs them before any side effect.
"""

from app.tools.policy.taint import Taint
from app.tools.policy.turn import TurnPolicy

__all__ = ["Taint", "TurnPolicy"]
