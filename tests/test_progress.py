"""devenus.progress: a bar on a terminal, plain lines in a file (a log that a person reads later)."""

import io

from devenus.progress import LineProgress, progress_bar


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_lines_every_tenth_and_at_the_end():
    out = io.StringIO()
    p = LineProgress(40, "mine", "q", file=out, clock=Clock())
    for _ in range(40):
        p.update(1)
        p.update(0)  # heartbeats between questions print nothing while no time passes
    p.close()
    lines = out.getvalue().splitlines()
    assert [ln.split(" ")[1] for ln in lines] == [f"{4 * i}/40" for i in range(1, 11)]
    assert lines[-1] == "mine: 40/40 q (100%), 0s"  # once, not again at close()


def test_a_heartbeat_on_time_when_nothing_finishes():
    out, clock = io.StringIO(), Clock()
    p = LineProgress(64, "gen", "q", file=out, every_s=30, clock=clock)
    clock.t = 29.0
    p.update(0)
    assert out.getvalue() == ""
    clock.t = 31.0
    p.update(0)  # minutes inside one batch: a line says it is alive
    assert out.getvalue() == "gen: 0/64 q (0%), 31s\n"
    clock.t = 95.0
    p.update(8)
    assert out.getvalue().splitlines()[-1] == "gen: 8/64 q (12%), 1m35s, ~11m05s left"


def test_no_total_postfix_and_close_prints_the_last_count():
    out, clock = io.StringIO(), Clock()
    p = LineProgress(None, "score", " rows", file=out, clock=clock)
    p.update(5)
    p.set_postfix(tok_s="12", refresh=False)
    assert p.n == 5 and p.format_dict["elapsed"] == 0
    p.close()
    p.close()
    assert out.getvalue() == "score: 5 rows, 0s [tok_s=12]\n"


def test_a_file_gets_lines_a_terminal_a_bar_and_off_is_silent():
    out = io.StringIO()
    assert isinstance(progress_bar(3, "x", file=out), LineProgress)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    from tqdm import tqdm

    assert isinstance(progress_bar(3, "x", file=Tty()), tqdm)
    off = progress_bar(3, "x", file=out, enabled=False)
    off.update(3)
    off.close()
    assert out.getvalue() == ""


def test_select_stage_bars_print_lines_into_a_log(capsys):
    # `devenus select run ... > log 2>&1` used to leave no progress at all in the log
    from devenus.select.run import bar as _bar

    bar = _bar(4, "generate", None)
    bar.update(2)
    bar.update(2)
    bar.close()
    assert capsys.readouterr().err.splitlines()[-1] == "generate: 4/4 q (100%), 0s"
    silent = _bar(4, "score", False)
    silent.update(4)
    silent.close()
    assert capsys.readouterr().err == ""
