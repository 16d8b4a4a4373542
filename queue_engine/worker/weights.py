"""A worker's weighted queues (`--queues critical:6,default:3,low:1`): while every queue
has work, its claims take their jobs in the ratio of the weights; a queue alone with
work gets the whole worker."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from queue_engine import sql
from queue_engine.worker.script import Prepared

# The claims (sql/claim.py): under every limit, plain, and under every limit but fair
# share; then the same for a worker with weights.
CLAIMS = (
    Prepared("qe_claim", sql.CLAIM),
    Prepared("qe_claim_plain", sql.CLAIM_PLAIN),
    Prepared("qe_claim_unfair", sql.CLAIM_UNFAIR),
)
WEIGHTED_CLAIMS = (
    Prepared("qe_claim_weighted", sql.CLAIM_WEIGHTED),
    Prepared("qe_claim_plain_weighted", sql.CLAIM_PLAIN_WEIGHTED),
    Prepared("qe_claim_unfair_weighted", sql.CLAIM_UNFAIR_WEIGHTED),
)
MAX_WEIGHT = 1000


def parse_queues(text: str) -> tuple[list[str], dict[str, int] | None]:
    """The queue names of `--queues`, and their weights if any has one (the others
    weigh 1); raises ValueError with what was wrong."""
    names: list[str] = []
    weights: dict[str, int] = {}
    weighted = False
    for part in (part.strip() for part in text.split(",")):
        if not part:
            continue
        name, colon, weight = (piece.strip() for piece in part.partition(":"))
        if not name:
            raise ValueError(f"--queues: {part!r} has no queue name")
        if name in weights:
            raise ValueError(f"--queues names {name!r} twice; give each queue once")
        if colon:
            weighted = True
            if not weight.isdigit() or not 1 <= int(weight) <= MAX_WEIGHT:
                raise ValueError(
                    f"--queues: the weight of {name!r} must be a whole number from 1 to "
                    f"{MAX_WEIGHT}, not {weight!r} (as in critical:6,default:3,low:1)"
                )
        names.append(name)
        weights[name] = int(weight) if colon else 1
    return names, weights if weighted else None


class QueueWeights:
    """The turns of a worker's weighted queues, carried from claim to claim.

    The claim ranks the n-th job it could take of a queue at lag + n / weight
    (sql/shares.py, WEIGHTS), so that a claim of one job still takes turns. After each
    claim, each queue's lag moves on by what it took; a queue that had nothing to
    give comes back no more than one turn behind the others, so a queue that was empty
    for a while does not then take the whole worker to catch up.
    """

    def __init__(self, queues: list[str], weights: dict[str, int] | None) -> None:
        self.queues = queues
        self.weights = {name: float(weights[name]) for name in queues} if weights else {}
        self.lags = dict.fromkeys(self.weights, 0.0)

    def statement(self, plain: bool, fair: bool = True) -> Prepared:
        """The plain claim, else the full one, or the one without fair share while no
        fair queue is in sight (not `fair`); each with the worker's weights if any."""
        full, plain_claim, unfair = WEIGHTED_CLAIMS if self.weights else CLAIMS
        if plain:
            return plain_claim
        return full if fair else unfair

    def params(self, queues: list[str] | None = None) -> dict[str, list[float]]:
        """The claim's weights and lags, in the order of the queues it is sent with
        (`queues`: a claim alone's, else the worker's)."""
        if not self.weights:
            return {}
        names = self.queues if queues is None else queues
        return {
            "weights": [self.weights.get(name, 1.0) for name in names],
            "lags": [self.lags.get(name, 0.0) for name in names],
        }

    def claimed(self, queues: Iterable[str]) -> None:
        """Move the turns on by the jobs a claim took, by queue."""
        taken = Counter(name for name in queues if name in self.weights)
        if not taken:
            return
        for name, count in taken.items():
            self.lags[name] += count / self.weights[name]
        last = max(self.lags[name] for name in taken)  # the turn of the last job taken
        for name, weight in self.weights.items():
            self.lags[name] = max(self.lags[name], last - 1 / weight) - last
