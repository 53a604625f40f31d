"""The campaign's LLM budget: reserve the worst case before a call, settle the real cost after.

Concurrent calls can never overshoot the cap: a call starts only if what is already spent, plus
what calls in flight may still spend, plus this call's worst case fits. The worst case prices
every prompt byte as one input token at the dearer of the input and cache-write prices (a byte-level
tokenizer never makes more tokens than bytes) and the full ``max_tokens`` as output. Reservation
and the check happen with no ``await`` between them, so on one event loop they are atomic.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernel_scientist.blackboard.config import LLMConfig

from ..brain import BudgetExhausted
from ._transport import Usage


@dataclass(frozen=True)
class Reservation:
    usd: float
    tokens: int


class Ledger:
    def __init__(self, cfg: LLMConfig, spent_usd: float = 0.0, spent_tokens: int = 0, enforce: bool = True) -> None:
        self.cfg = cfg
        self.spent_usd, self.spent_tokens = spent_usd, spent_tokens
        self.held_usd, self.held_tokens = 0.0, 0
        self.enforce = enforce

    def cost(self, usage: Usage) -> float:
        p = self.cfg.prices
        return (
            usage.input_tokens * p.input
            + usage.output_tokens * p.output
            + usage.cache_write_tokens * p.cache_write
            + usage.cache_read_tokens * p.cache_read
        ) / 1e6

    def reserve(self, prompt_bytes: int, max_tokens: int) -> Reservation:
        p = self.cfg.prices
        worst = Reservation(
            usd=(prompt_bytes * max(p.input, p.cache_write) + max_tokens * p.output) / 1e6,
            tokens=prompt_bytes + max_tokens,
        )
        if self.enforce:
            usd, tokens = self.cfg.budget_usd, self.cfg.budget_tokens
            if usd is not None and self.spent_usd + self.held_usd + worst.usd > usd:
                raise BudgetExhausted(
                    f"the LLM budget (llm.budget_usd = {usd:g}) cannot cover another call: spent "
                    f"${self.spent_usd:.4f}, in flight up to ${self.held_usd:.4f}, this call up to ${worst.usd:.4f}"
                )
            if tokens is not None and self.spent_tokens + self.held_tokens + worst.tokens > tokens:
                raise BudgetExhausted(
                    f"the LLM budget (llm.budget_tokens = {tokens}) cannot cover another call: spent "
                    f"{self.spent_tokens}, in flight up to {self.held_tokens}, this call up to {worst.tokens}"
                )
        self.held_usd += worst.usd
        self.held_tokens += worst.tokens
        return worst

    def settle(self, reservation: Reservation, usage: Usage) -> float:
        """Release the reservation and book what the call really cost; returns that cost."""
        self.held_usd -= reservation.usd
        self.held_tokens -= reservation.tokens
        cost = self.cost(usage)
        self.spent_usd += cost
        self.spent_tokens += (
            usage.input_tokens + usage.output_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        )
        return cost

    def describe(self) -> str:
        cap = []
        if self.cfg.budget_usd is not None:
            cap.append(f"of ${self.cfg.budget_usd:g}")
        if self.cfg.budget_tokens is not None:
            cap.append(f"{self.spent_tokens} of {self.cfg.budget_tokens} tokens")
        return f"campaign ${self.spent_usd:.4f}" + (f" ({', '.join(cap)})" if cap else "")
