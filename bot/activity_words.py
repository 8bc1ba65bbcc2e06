"""The engine's activity lines in the team's language: each English line read back against the
engine's templates (agent/activity.py) and said again with this language's template and the same
values (what the model asked for: a query, a page's goal, a section's title stay as written).

A line of no known form (one from an older version, a capacity wait's detail) is shown as it is.
"""

from __future__ import annotations

from agent import ACTIVITY, BATCH_SEPARATOR, BRANCH_SEPARATOR, BRANCH_STATES
from agent import parse_activity as parse

__all__ = ["ACTIVITY_WORDS", "BRANCH_WORDS", "activity_in", "batch_in", "board_in"]

ACTIVITY_WORDS: dict[str, dict[str, str]] = {
    "de": {
        "running": "Führe {tool} aus",
        "searching": "Suche: {query}",
        "reading": "Lese {target}: {goal}",
        "reading_file": "Lese Datei {file}: {goal}",
        "reading_thread": "Lese die Nachrichten des Threads ({range})",
        "searching_files": "Durchsuche die Dateien des Threads nach: {query}",
        "searching_slack": "Durchsuche das Slack des Teams: {query}",
        "asking": "Frage {server}: {tool}",
        "calculating": "Berechne {expression}",
        "charting": "Zeichne ein Diagramm: {title}",
        "rereading_result": "Lese gespeichertes Ergebnis {id} erneut",
        "rereading_section": "Lese Berichtsabschnitt {section} erneut",
        "rereading_source": "Lese Quelle {marker} erneut",
        "writing_section": "Schreibe Abschnitt: {title}",
        "revising": "Überarbeite {section}: {reason}",
        "starting_tasks": "Starte {count} Teilaufgabe(n): {names}",
        "planning": "Plane die Recherche",
        "resuming": "Setze beim letzten Zwischenstand fort",
        "compacting": "Verdichte Notizen, dann geht es weiter",
        "summarising": "Schreibe die Zusammenfassung ({reason})",
        "stopping": "Halte an ({reason}): schreibe die Zusammenfassung",
        "upgraded": "Budget auf {profile} erhöht (Revision {revision})",
        "waiting": "Warte auf Modellkapazität",
        "board": "Teilaufgaben: {done} fertig, {running} laufen — {branches}",
        "branch": "{number}. {label}: {state}",
    },
    "ja": {
        "running": "{tool} を実行中",
        "searching": "検索中: {query}",
        "reading": "{target} を読んでいます: {goal}",
        "reading_file": "ファイル {file} を読んでいます: {goal}",
        "reading_thread": "スレッドのメッセージを読んでいます({range})",
        "searching_files": "スレッドのファイルを検索中: {query}",
        "searching_slack": "チームの Slack を検索中: {query}",
        "asking": "{server} に問い合わせ中: {tool}",
        "calculating": "計算中: {expression}",
        "charting": "グラフを作成中: {title}",
        "rereading_result": "保存した結果 {id} を読み直しています",
        "rereading_section": "レポートのセクション {section} を読み直しています",
        "rereading_source": "出典 {marker} を読み直しています",
        "writing_section": "セクションを執筆中: {title}",
        "revising": "{section} を改訂中: {reason}",
        "starting_tasks": "{count} 件のサブタスクを開始: {names}",
        "planning": "調査を計画しています",
        "resuming": "前回のチェックポイントから再開しています",
        "compacting": "メモを整理してから続けます",
        "summarising": "要約を書いています({reason})",
        "stopping": "停止します({reason}): 要約を書いています",
        "upgraded": "予算を {profile} に拡大しました(改訂 {revision})",
        "waiting": "モデルの処理枠を待っています",
        "board": "サブタスク: 完了 {done} · 実行中 {running} — {branches}",
        "branch": "{number}. {label}: {state}",
    },
    "zh": {
        "running": "正在运行 {tool}",
        "searching": "搜索中:{query}",
        "reading": "正在阅读 {target}:{goal}",
        "reading_file": "正在阅读文件 {file}:{goal}",
        "reading_thread": "正在阅读对话串中的消息({range})",
        "searching_files": "正在搜索对话串中的文件:{query}",
        "searching_slack": "正在搜索团队的 Slack:{query}",
        "asking": "正在询问 {server}:{tool}",
        "calculating": "正在计算 {expression}",
        "charting": "正在绘制图表:{title}",
        "rereading_result": "正在重读已存结果 {id}",
        "rereading_section": "正在重读报告章节 {section}",
        "rereading_source": "正在重读来源 {marker}",
        "writing_section": "正在撰写章节:{title}",
        "revising": "正在修订 {section}:{reason}",
        "starting_tasks": "启动 {count} 个子任务:{names}",
        "planning": "正在规划调研",
        "resuming": "正在从上一个检查点继续",
        "compacting": "正在整理笔记,随后继续",
        "summarising": "正在撰写摘要({reason})",
        "stopping": "正在停止({reason}):撰写摘要",
        "upgraded": "预算已提升至 {profile}(修订 {revision})",
        "waiting": "正在等待模型处理额度",
        "board": "子任务:完成 {done} · 进行中 {running} — {branches}",
        "branch": "{number}. {label}:{state}",
    },
}
# A task agent's state on the board, by the English words the engine writes.
BRANCH_WORDS: dict[str, dict[str, str]] = {
    "de": {
        "starting": "startet",
        "done": "fertig",
        "stopped at its budget": "am Budget angehalten",
        "failed": "fehlgeschlagen",
    },
    "ja": {"starting": "開始中", "done": "完了", "stopped at its budget": "予算で停止", "failed": "失敗"},
    "zh": {"starting": "启动中", "done": "完成", "stopped at its budget": "因预算停止", "failed": "失败"},
}
_KINDS = frozenset(ACTIVITY) - {"board", "branch"}
_BRANCH = frozenset({"branch"})
_STATE_WORDS = frozenset(BRANCH_STATES.values())


def _one(line: str, code: str) -> str:
    found = parse(line, _KINDS)
    if found is None:
        return line
    kind, values = found
    return ACTIVITY_WORDS[code][kind].format(**values)


def batch_in(line: str, code: str) -> list[str]:
    """A parallel batch's lines, each in language `code`: a piece that starts no known line is part
    of the one before it (a query or goal with the separator in it)."""
    parts: list[str] = []
    for piece in line.split(BATCH_SEPARATOR):
        if parts and parse(piece, _KINDS) is None:
            parts[-1] += BATCH_SEPARATOR + piece
        else:
            parts.append(piece)
    return [_one(part, code) if code in ACTIVITY_WORDS else part for part in parts]


def _batch(line: str, code: str) -> str:
    return BATCH_SEPARATOR.join(batch_in(line, code))


def board_in(line: str, code: str) -> tuple[dict[str, str], list[str]] | None:
    """A task-agent board line's counts and its agents' lines, each in language `code`; None for another line."""
    board = parse(line, frozenset({"board"}))
    if board is None:
        return None
    values = board[1]
    branches = values.pop("branches").split(BRANCH_SEPARATOR)
    return values, [_branch(b, code) if code in ACTIVITY_WORDS else b for b in branches]


def _branch(branch: str, code: str) -> str:
    found = parse(branch, _BRANCH)
    if found is None:
        return branch
    values = found[1]
    state = values["state"]
    values["state"] = BRANCH_WORDS[code][state] if state in _STATE_WORDS else _batch(state, code)
    return ACTIVITY_WORDS[code]["branch"].format(**values)


def activity_in(line: str, code: str) -> str:
    """The engine's English activity line in language `code` (as it is, for English or a language
    the bot has no words for)."""
    if code not in ACTIVITY_WORDS or not line:
        return line
    board = board_in(line, code)
    if board is not None:
        values, branches = board
        return ACTIVITY_WORDS[code]["board"].format(**values, branches=BRANCH_SEPARATOR.join(branches))
    return _batch(line, code)
