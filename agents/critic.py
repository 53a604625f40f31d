"""The critic: spends the scarce evaluations well.

Before submission it reviews each draft against its plan with the static rules (the attack list)
and a cheap CPU pre-screen, then approves it into the queue with an expected value, or sends it
back. After evaluation it compares the observed uplift with the prediction and records a verdict
on the hypothesis: confirmed, refuted or inconclusive (within the timing noise). A kernel that did
not compile is a build failure, and one that an evaluator's rule rejected or that passed without a
time is inconclusive: none says anything for or against the idea, so none is "refuted". Each
verdict is one sentence: the prediction, then what was observed or why nothing was.
"""

from __future__ import annotations

import anyio
from anyio.abc import TaskStatus
from kernel_scientist.blackboard import (
    LOWERED_AUTHOR,
    Evaluation,
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

    def _lowered_from(self, seed: Kernel | None) -> str:
        """What a lowering by Inductor was made of: the seed once it passed its check, else the
        folder's reference in its place (the campaign runner's rule, ``seed_to_lower``)."""
        evaluation = self.board.evaluation_for(seed.id) if seed is not None else None
        return "the seed" if evaluation is not None and evaluation.report.passed() else "the folder's reference"

    # ---- before: review -----------------------------------------------------------------
    async def review(self, kernel: Kernel) -> None:
        board = self.board
        hyp = board.hypothesis(kernel.hypothesis_id) if kernel.hypothesis_id else None
        base = board.kernel(kernel.parent_id) if kernel.parent_id else None
        # The policy on what a kernel may call binds the kernels the campaign writes, not its seed
        # or the seed's lowering (Kernel.is_baseline): a PyTorch matmul seed is where it starts.
        policy = self.ctx.scenario.evaluator.own_kernel and not kernel.is_baseline()
        findings = static_findings(kernel.source, own_kernel=policy)
        rejected = any(f.rejects for f in findings)
        twins = [
            k
            for k in board.kernels_with_hash(kernel.source_hash)
            if k.id != kernel.id and k.state != KernelState.REJECTED
        ]
        prescreen = None
        # The seed is the task's own submission and every prediction's baseline: never pre-screened.
        # Its lowering by Inductor is new code like any candidate's.
        lowered = kernel.author == LOWERED_AUTHOR
        screen = self.ctx.scenario.agents.prescreen and (hyp is not None or lowered)
        if not rejected and not twins and screen:
            report = await self.ctx.backend.prescreen(kernel.source, baseline=kernel.is_baseline())
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
            deviations=kernel.deviations,
            queued=[
                s.expected_value for s in board.submissions(SubmissionState.QUEUED) if s.expected_value < SEED_PRIORITY
            ],
            evaluations_left=self.starts_left(),
        )
        critique: Critique | None
        if hyp is None and self.asks_a_model:  # the seed and its lowering run whatever a model thinks:
            critique = Critique(approve=True, reasons=[], expected_value=SEED_PRIORITY)  # no call for them
        else:
            critique = await self.ask(f"review of kernel {kernel.id}", self.ctx.brain.review, view)
        if critique is None:  # no review: a candidate is sent back; the seed (the baseline
            # everything is measured against) is judged by the rules and the pre-screen alone
            critique = Critique(
                approve=hyp is None, reasons=[f"the review failed: {self.failed_why}"], expected_value=0.0
            )
        approve, reasons, value = critique.approve, list(critique.reasons), critique.expected_value
        if twins:  # evaluations are scarce: never spend one on a kernel already queued or measured
            approve, reasons = False, [f"identical to kernel {twins[0].id}"]
        if rejected or (prescreen is not None and not prescreen.passed):
            if approve:  # the brain approved: the record says what overruled it
                overruled = [f.text() for f in findings if f.rejects]
                if prescreen is not None and not prescreen.passed:
                    overruled.append(f"CPU pre-screen failed: {prescreen.text()}")
                reasons = overruled + reasons
            approve = False  # the rules and the pre-screen bind whatever the brain thinks
        if hyp is None and approve:
            value = SEED_PRIORITY
            reasons = [
                f"{self._lowered_from(base)} lowered by Inductor, queued first; static rules clean"
                + ("; pre-screen passed" if prescreen is not None else "")
                if lowered
                else "the seed: every prediction's baseline, queued first; static rules clean"
            ]
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
        predicted = metrics.predicted_range_text(hyp.min_uplift, hyp.max_uplift)
        observed = None
        if kernel.state == KernelState.REJECTED:
            verdict, why = Verdict.INCONCLUSIVE, f"kernel {kernel.id} was never evaluated: the review sent it back"
        else:
            ev = board.evaluation_for(kernel.id)
            observed = observed_uplift(board.evaluation_for(hyp.base_id), ev)
            if observed is None:
                verdict, why = _untimed(kernel.id, hyp.base_id, ev)
            else:
                if observed >= max(hyp.min_uplift, 2 * noise):
                    verdict, why = Verdict.CONFIRMED, "observed at least the predicted minimum"
                elif observed <= -2 * noise or (hyp.min_uplift > 2 * noise and observed < 0):
                    verdict, why = Verdict.REFUTED, "slower than its base"
                else:
                    verdict, why = Verdict.INCONCLUSIVE, "within the noise or below the predicted minimum"
                why = f"observed {metrics.uplift_text(observed)} ({why})"
        board.update_hypothesis(hyp.id, verdict=verdict, observed_uplift=observed)
        self.say(
            "verdict",
            f"H{hyp.id} {verdict}: predicted {predicted}, {why}",
            kernel_id=kernel.id,
            hypothesis_id=hyp.id,
        )


# What a failed kernel did, as the verdict's sentence says it (the reason follows).
_FAILED = {
    Outcome.WRONG_OUTPUT: "computed a wrong answer",
    Outcome.CRASH: "crashed",
    Outcome.TIMEOUT: "ran out of time",
    Outcome.OUT_OF_MEMORY: "ran out of memory",
}


def _untimed(kernel_id: int, base_id: int, ev: Evaluation | None) -> tuple[Verdict, str]:
    """The verdict, and the sentence after "predicted ...,", on a hypothesis whose kernel has no
    uplift. A kernel that did not compile, broke one of the evaluator's rules, or passed without a
    time says nothing for or against the idea; one that computed a wrong answer, crashed or ran out
    of time or memory refutes it as implemented."""
    if ev is None:
        return Verdict.REFUTED, f"nothing observed: kernel {kernel_id} has no evaluation"
    outcome, reason = ev.report.outcome, ev.report.reason
    if outcome == Outcome.COMPILE_ERROR:
        return Verdict.BUILD_FAILED, f"nothing observed: kernel {kernel_id} did not compile: {reason}"
    if outcome == Outcome.REJECTED_BY_RULE:
        return Verdict.INCONCLUSIVE, f"nothing observed: the evaluator rejected kernel {kernel_id} by its {reason}"
    if outcome == Outcome.PASSED:
        if ev.report.score_us is None:
            return Verdict.INCONCLUSIVE, f"nothing observed: kernel {kernel_id} passed but was not timed: {reason}"
        return Verdict.INCONCLUSIVE, f"nothing observed: its base, kernel {base_id}, has no time to compare with"
    return Verdict.REFUTED, f"nothing observed: kernel {kernel_id} {_FAILED.get(outcome, str(outcome))}: {reason}"
