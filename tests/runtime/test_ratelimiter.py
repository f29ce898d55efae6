"""Rate limiters: exact delays under a fake clock, against client-go's default_rate_limiters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.runtime.util.clock import FakeClock
from memop.runtime.workqueue.ratelimiter import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_per_failure_from_base_and_caps() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [limiter.when("a") for _ in range(20)]
    # 0.005 * 2**18 = 1310.72 > 1000: the 19th and later retries wait the cap.
    assert delays == [0.005 * 2**n for n in range(18)] + [1000.0, 1000.0]
    assert limiter.num_requeues("a") == 20


def test_exponential_counts_each_item_separately_and_forget_resets() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    assert [limiter.when("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    assert limiter.when("b") == 0.005
    assert (limiter.num_requeues("a"), limiter.num_requeues("b"), limiter.num_requeues("c")) == (3, 1, 0)
    limiter.forget("a")
    limiter.forget("never-seen")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005
    assert limiter.when("b") == 0.01


def test_exponential_does_not_overflow_for_huge_failure_counts() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    for _ in range(3000):  # 2.0**1024 overflows a float; the limiter must just return the cap
        delay = limiter.when("a")
    assert delay == 1000.0
    assert limiter.num_requeues("a") == 3000
    # A cap above the largest finite backoff still holds at the overflow point.
    huge: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(1.0, float("inf"))
    assert [huge.when("a") for _ in range(1025)][-2:] == [2.0**1023, float("inf")]
    zero: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.0, 10.0)
    assert {zero.when("a") for _ in range(2000)} == {0.0}


def test_exponential_rejects_negative_delays() -> None:
    with pytest.raises(ValueError, match="negative"):
        ItemExponentialFailureRateLimiter(-1.0, 10.0)
    with pytest.raises(ValueError, match="negative"):
        ItemExponentialFailureRateLimiter(1.0, -10.0)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["when", "forget"]), st.sampled_from(["a", "b", "c"])), max_size=60),
    st.sampled_from([0.001, 0.005, 0.1]),
    st.sampled_from([0.05, 1.0, 1000.0]),
)
def test_exponential_matches_a_reference_model(
    operations: list[tuple[str, str]], base: float, cap: float
) -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(base, cap)
    failures: dict[str, int] = {}
    for operation, item in operations:
        if operation == "when":
            n = failures.get(item, 0)
            failures[item] = n + 1
            assert limiter.when(item) == min(base * 2**n, cap)
        else:
            failures.pop(item, None)
            limiter.forget(item)
        for key in ("a", "b", "c"):
            assert limiter.num_requeues(key) == failures.get(key, 0)


def test_bucket_allows_the_burst_then_spaces_retries_at_qps() -> None:
    clock = FakeClock()
    limiter: BucketRateLimiter[str] = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [limiter.when(f"item-{i}") for i in range(100)] == [0.0] * 100
    # Past the burst every reservation queues 1/qps behind the previous one, whatever the item.
    assert [limiter.when("same") for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert limiter.num_requeues("same") == 0
    limiter.forget("same")  # no per-item state: forgetting changes nothing
    assert limiter.when("x") == pytest.approx(0.4)
    # After 1 s ten tokens have matured: the debt of 4 is paid and 6 are in hand.
    clock.advance(1.0)
    assert [limiter.when("y") for _ in range(6)] == [0.0] * 6
    assert limiter.when("y") == pytest.approx(0.1)
    # The bucket never holds more than the burst, however long it rests.
    clock.advance(3600)
    assert [limiter.when("z") for _ in range(100)] == [0.0] * 100
    assert limiter.when("z") == pytest.approx(0.1)


def test_max_of_calls_every_limiter_and_takes_the_longest() -> None:
    clock = FakeClock()
    exponential: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(1.0, 100.0)
    bucket: BucketRateLimiter[str] = BucketRateLimiter(qps=1, burst=2, clock=clock)
    limiter: MaxOfRateLimiter[str] = MaxOfRateLimiter(exponential, bucket)
    # The exponential limiter dominates, but the bucket still spends a token on each call.
    assert limiter.when("a") == 1.0
    assert limiter.when("a") == 2.0
    assert limiter.when("b") == 1.0  # bucket: 1 s of debt, exponential: 1 s
    assert limiter.when("c") == 2.0  # bucket: 2 s of debt now dominates c's first 1 s
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert exponential.num_requeues("a") == 0
    with pytest.raises(ValueError, match="at least one"):
        MaxOfRateLimiter()


class _CountingLimiter:
    """A limiter with fixed answers, recording the calls it gets."""

    def __init__(self, delay: float, requeues: int) -> None:
        self.delay = delay
        self.requeues = requeues
        self.calls: list[tuple[str, str]] = []

    def when(self, item: str) -> float:
        self.calls.append(("when", item))
        return self.delay

    def forget(self, item: str) -> None:
        self.calls.append(("forget", item))

    def num_requeues(self, item: str) -> int:
        return self.requeues


def test_max_of_forgets_in_all_and_reports_the_largest_requeue_count() -> None:
    first, second = _CountingLimiter(3.0, 1), _CountingLimiter(0.5, 7)
    limiter: RateLimiter[str] = MaxOfRateLimiter[str](first, second)
    assert limiter.when("k") == 3.0
    limiter.forget("k")
    assert first.calls == second.calls == [("when", "k"), ("forget", "k")]
    assert limiter.num_requeues("k") == 7
    assert MaxOfRateLimiter[str](_CountingLimiter(-1.0, 0)).when("k") == 0.0


def test_default_controller_rate_limiter_is_5ms_exponential_and_10qps_burst_100() -> None:
    clock = FakeClock()
    limiter: RateLimiter[str] = default_controller_rate_limiter(clock)
    # One item failing repeatedly: 5 ms, 10 ms, 20 ms ... (the bucket has tokens to spare).
    assert [limiter.when("a") for _ in range(5)] == [0.005, 0.01, 0.02, 0.04, 0.08]
    assert limiter.num_requeues("a") == 5
    # 95 more distinct items empty the bucket (100 tokens in all) at 5 ms each...
    assert {limiter.when(f"item-{i}") for i in range(95)} == {0.005}
    # ...after which retries are spaced at 10 per second, whatever their own backoff.
    assert [limiter.when(f"late-{i}") for i in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    # The per-item cap is 1000 s.
    for _ in range(30):
        delay = limiter.when("a")
    assert delay == 1000.0
