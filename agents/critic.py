"""The critic: spends the scarce evaluations well.

Before submission it reviews each draft against its plan with the static rules (the attack list)
and a cheap CPU pre-screen, then approves it into the queue with an expected value, or sends it
back. After evaluation it compares the observed uplift with the prediction and records a verdict
on the hypothesis: confirmed, refuted or inconclusive (within the timing noise). A kernel that did
not compile is a build failure: it says nothing for or against the idea, so it is never "refuted".
"""

from __future__ import annotations

import anyio
from anyio.abc import TaskStatus
from kernel_scientist.blackboard import (
    Hypothesis,
    HypothesisState,
    Kernel,
    KernelState,
    Outcome,
    SubmissionState,
    Verdict,
    metrics,
)
from kernel_scientist.evaluator import static_findings

from ._base import SEED_PRIORITY, Agent
from ._views import observed_uplift
from .brain import Critique, Prescreen, ReviewView


class Critic(Agent):
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        latency = self.ctx.scenario.agents.latency.critic
        with anyio.move_on_at(self.ctx.clock.to_loop(self.ctx.clock.deadline)):
            while True:
                if not ((self._drafts() and not self.retired) or self._unjudged()):
                    await self.board.wait_change("kernel", "evaluation")
                    continue
                await self.think(latency)
                drafts = self._drafts()
                if drafts and not self.retired:
                    await self.review(drafts[0])
                for hyp in self._unjudged():
                    self.judge(hyp)

    async def final_pass(self) -> None:
        for hyp in self._unjudged():
            self.judge(hyp)

    def _drafts(self) -> list[Kernel]:
        return self.board.kernels(KernelState.DRAFT)

    # ---- before: review -----------------------------------------------------------------
    async def review(self, kernel: Kernel) -> None:
        board = self.board
        hyp = board.hypothesis(kernel.hypothesis_id) if kernel.hypothesis_id else None
        base = board.kernel(kernel.parent_id) if kernel.parent_id else None
        findings = static_findings(kernel.source, own_kernel=self.ctx.scenario.evaluator.own_kernel)
        rejected = any(f.rejects for f in findings)
        twins = [
            k
            for k in board.kernels_with_hash(kernel.source_hash)
            if k.id != kernel.id and k.state != KernelState.REJECTED
        ]
        prescreen = None
        # The seed is the task's own submission and every prediction's baseline: never pre-screened.
        screen = self.ctx.scenario.agents.prescreen and hyp is not None
        if not rejected and not twins and screen:
            report = await self.ctx.backend.prescreen(kernel.source)
            prescreen = Prescreen(outcome=report.outcome, reason=report.reason)
        view = ReviewView(
            source=kernel.source,
            base_source=base.source if base else None,
            plan=hyp.plan if hyp else None,
            min_uplift=hyp.min_uplift if hyp else 0.0,
            max_uplift=hyp.max_uplift if hyp else 0.0,
            innovation=hyp.innovation if hyp else 0.0,
            static_findings=findings,
            prescreen=prescreen,
        )
        critique = await self.ask(f"review of kernel {kernel.id}", self.ctx.brain.review, view)
        if critique is None:  # no review: a candidate is sent back; the seed (the baseline
            # everything is measured against) is judged by the rules and the pre-screen alone
            critique = Critique(
                approve=hyp is None, reasons=["the review failed (see the warning above)"], expected_value=0.0
            )
        approve, reasons, value = critique.approve, list(critique.reasons), critique.expected_value
        if twins:  # evaluations are scarce: never spend one on a kernel already queued or measured
            approve, reasons = False, [f"identical to kernel {twins[0].id}"]
        if rejected or (prescreen is not None and not prescreen.passed):
            approve = False  # the rules and the pre-screen bind whatever the brain thinks
        if hyp is None and approve:
            value = SEED_PRIORITY
            reasons = ["the seed: every prediction's baseline, queued first; static rules clean"]
        board.review(
            kernel_id=kernel.id,
            reviewer=self.name,
            approved=approve,
            reasons=reasons,
            at=self.now(),
            expected_value=value,
        )
        if approve:
            queued = len(board.submissions(SubmissionState.QUEUED))
            priority = "first" if value == SEED_PRIORITY else f"with expected value {value:+.3f}"
            self.say(
                "review",
                f"kernel {kernel.id} approved, queued {priority} ({queued} in queue): " + "; ".join(reasons),
                kernel_id=kernel.id,
                hypothesis_id=kernel.hypothesis_id,
            )
        else:
            self.say(
                "review",
                f"kernel {kernel.id} sent back: " + "; ".join(reasons),
                kernel_id=kernel.id,
                hypothesis_id=kernel.hypothesis_id,
            )

    # ---- after: verdict -----------------------------------------------------------------
    def _unjudged(self) -> list[Hypothesis]:
        """Implemented hypotheses still pending whose kernel has its outcome (evaluated, failed or
        rejected in review)."""
        out = []
        for hyp in self.board.hypotheses(HypothesisState.IMPLEMENTED):
            if hyp.verdict != Verdict.PENDING or hyp.kernel_id is None:
                continue
            state = self.board.kernel(hyp.kernel_id).state
            if state in (KernelState.EVALUATED, KernelState.FAILED, KernelState.REJECTED):
                out.append(hyp)
        return out

    def judge(self, hyp: Hypothesis) -> None:
        """Record the verdict on one of ``_unjudged``'s hypotheses: the observed uplift against
        the predicted range, within the timing noise."""
        board = self.board
        assert hyp.kernel_id is not None, f"H{hyp.id} has no kernel to judge"  # _unjudged gives none such
        kernel = board.kernel(hyp.kernel_id)
        noise = self.ctx.scenario.evaluator.noise
        if kernel.state == KernelState.REJECTED:
            verdict, observed, why = Verdict.INCONCLUSIVE, None, "never evaluated (rejected in review)"
        else:
            ev = board.evaluation_for(kernel.id)
            base_ev = board.evaluation_for(hyp.base_id)
            observed = observed_uplift(base_ev, ev)
            if ev is not None and ev.report.outcome == Outcome.COMPILE_ERROR:
                verdict, why = Verdict.BUILD_FAILED, f"the kernel did not compile: {ev.report.reason}"
            elif observed is None:
                verdict, why = Verdict.REFUTED, f"the kernel failed: {ev.report.reason if ev else 'no result'}"
            elif observed >= max(hyp.min_uplift, 2 * noise):
                verdict, why = Verdict.CONFIRMED, "observed at least the predicted minimum"
            elif observed <= -2 * noise or (hyp.min_uplift > 2 * noise and observed < 0):
                verdict, why = Verdict.REFUTED, "slower than its base"
            else:
                verdict, why = Verdict.INCONCLUSIVE, "within the noise or below the predicted minimum"
        board.update_hypothesis(hyp.id, verdict=verdict, observed_uplift=observed)
        predicted = metrics.predicted_range_text(hyp.min_uplift, hyp.max_uplift)
        self.say(
            "verdict",
            f"H{hyp.id} {verdict}: predicted {predicted}, observed {metrics.uplift_text(observed)} ({why})",
            kernel_id=kernel.id,
            hypothesis_id=hyp.id,
        )
