"""A tiny refund agent for ``otel-agent-eval experiment`` (see the README's Experiments section).

``run(case)`` is the task: it "decides" by rule (no model) and records what it does with
``otel_agent_eval.manual``, the way an instrumented framework would. ``MentionsTheOrder`` is a
user evaluator named by ``module:Class`` (``--evaluators refund_agent:MentionsTheOrder``).
"""

from __future__ import annotations

import re

from otel_agent_eval import AgentTrace, EvalResult, Evaluator
from otel_agent_eval.experiments import Case
from otel_agent_eval.manual import agent_run

ORDERS = {"1": {"status": "paid", "amount": 42}, "2": {"status": "unpaid", "amount": 10}, "3": {"status": "shipped", "amount": 7}}


def run(case: Case) -> str:
    order = re.search(r"\d+", str(case.input))
    order_id = order.group() if order else "?"
    with agent_run("refunds", input=str(case.input)) as agent:
        with agent.step(thought="Look the order up first.") as step:
            record = ORDERS.get(order_id)
            step.tool_call("lookup_order", {"order_id": order_id}, result=record, error=None if record else "no such order")
        if record and record["status"] == "paid" and "refund" in str(case.input):
            with agent.step() as step:
                step.tool_call("refund_order", {"order_id": order_id}, result="ok")
            answer = f"Order {order_id} is refunded: {record['amount']} EUR."
        elif record:
            answer = f"Order {order_id} is {record['status']}."
        else:
            answer = f"I could not find order {order_id}."
        with agent.step() as step:
            step.output(answer)
        agent.finish(answer)
    return answer


class MentionsTheOrder(Evaluator):
    """The final answer names the order the user asked about."""

    name = "mentions_the_order"

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        asked = re.search(r"\d+", trace.input or "")
        if asked is None:
            return [self.skipped(trace, "the request names no order")]
        named = asked.group() in (trace.final_output or "")
        return [self.scored(trace, 1.0 if named else 0.0, f"order {asked.group()} {'named' if named else 'not named'}")]
