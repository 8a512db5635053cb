"""Shared parts of the benchmarks: a seeded synthetic workspace, timing and resource helpers.

The workspace generator writes what a long-running bot accumulates: one dated daily file per day
(``scopes/<scope>/memory/YYYY-MM-DD.md``), a ``MEMORY.md`` per scope and knowledge pages under
``knowledge/<category>/<slug>.md``. Text is English, Chinese and mixed, drawn from fixed word
lists (below) plus a large seeded vocabulary of pseudo-words, with Zipf-distributed word
frequencies so that some terms hit most chunks and most terms hit few, as in real notes.

Everything is deterministic for a given seed: the same parameters give byte-identical files.
"""

from __future__ import annotations

import bisect
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from itertools import accumulate
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import contextlib

from memory.index.chunker import chunk_text

# --------------------------------------------------------------------------- word lists
ENGLISH_WORDS: tuple[str, ...] = tuple(
    ["the", "a", "to", "and", "of", "in", "is", "it", "for", "that", "on", "was", "with", "he", "as", "at", "be", "this", "have", "from", "or", "one", "had", "by", "but", "not", "what", "all", "were", "we", "when", "your", "can", "said", "there", "use", "an", "each", "which", "she", "do", "how", "their", "if", "will", "up", "other", "about", "out", "many", "then", "them", "these", "so", "some", "her", "would", "make", "like", "him", "into", "time", "has", "look", "two", "more", "write", "go", "see", "number", "no", "way", "could", "people", "my", "than", "first", "water", "been", "call", "who", "oil", "its", "now", "find", "long", "down", "day", "did", "get", "come", "made", "may", "part", "meeting", "project", "deploy", "server", "client", "budget", "invoice", "flight", "hotel", "train", "ticket", "doctor", "dentist", "appointment", "birthday", "dinner", "lunch", "coffee", "tea", "recipe", "garden", "bike", "car", "repair", "insurance", "contract", "lease", "landlord", "rent", "salary", "review", "release", "feature", "bug", "issue", "branch", "merge", "test", "build", "pipeline", "backup", "database", "index", "query", "search", "memory", "vector", "keyword", "latency", "cache", "config", "password", "account", "login", "email", "phone", "message", "reminder", "calendar", "schedule", "weekend", "holiday", "vacation", "museum", "concert", "movie", "book", "chapter", "lesson", "course", "tutorial", "exam", "homework", "teacher", "student", "school", "office", "manager", "colleague", "team", "sprint", "retro", "standup", "roadmap", "launch", "customer", "support", "ticket", "refund", "order", "delivery", "package", "warehouse", "shipment", "price", "discount", "market", "stock", "portfolio", "bank", "loan", "mortgage", "tax", "receipt", "report", "summary", "draft", "slides", "presentation", "workshop", "conference", "keynote", "speaker", "travel", "airport", "passport", "visa", "embassy", "language", "lesson", "grammar", "vocabulary", "spanish", "french", "japanese", "chinese", "german", "italian", "korean", "piano", "guitar", "violin", "running", "swimming", "hiking", "climbing", "yoga", "gym", "weight", "sleep", "diet", "vitamin", "allergy", "medicine", "pharmacy", "clinic", "hospital", "nurse", "surgery", "recovery", "family", "mother", "father", "sister", "brother", "daughter", "son", "grandmother", "uncle", "aunt", "cousin", "friend", "neighbour", "wedding", "anniversary", "gift", "flowers", "cake", "party", "guest", "invitation", "playlist", "podcast", "episode", "newsletter", "article", "blog", "paper", "thesis", "research", "experiment", "dataset", "model", "training", "evaluation", "benchmark", "kernel", "compiler", "runtime", "library", "framework", "plugin", "extension", "browser", "terminal", "laptop", "monitor", "keyboard", "mouse", "printer", "router", "network", "wifi", "bluetooth", "battery", "charger", "cable", "adapter", "kitchen", "fridge", "oven", "stove", "sink", "window", "door", "roof", "garage", "basement", "attic", "balcony", "plant", "tomato", "basil", "lemon", "apple", "banana", "orange", "grape", "mango", "peach", "cherry", "rice", "noodle", "soup", "bread", "cheese", "butter", "milk", "yogurt"]
)

# Common two-character Chinese words (教程 is the query the targets name).
CJK_WORDS: tuple[str, ...] = tuple(
    ["教程", "学习", "工作", "会议", "项目", "客户", "服务", "系统", "数据", "搜索", "记忆", "文件", "代码", "测试", "发布", "部署", "服务器", "数据库", "问题", "方法", "时间", "今天", "明天", "昨天", "上午", "下午", "晚上", "周末", "假期", "旅行", "机票", "酒店", "火车", "地铁", "医生", "医院", "牙医", "预约", "生日", "晚饭", "午饭", "咖啡", "茶叶", "菜谱", "花园", "自行车", "汽车", "维修", "保险", "合同", "房租", "房东", "工资", "报告", "总结", "草稿", "演讲", "幻灯片", "会场", "机场", "护照", "签证", "语言", "语法", "单词", "英语", "日语", "法语", "德语", "中文", "钢琴", "吉他", "跑步", "游泳", "爬山", "瑜伽", "健身", "睡眠", "饮食", "维生素", "过敏", "药店", "诊所", "护士", "手术", "康复", "家人", "妈妈", "爸爸", "姐姐", "哥哥", "女儿", "儿子", "奶奶", "叔叔", "阿姨", "朋友", "邻居", "婚礼", "纪念日", "礼物", "鲜花", "蛋糕", "派对", "客人", "邀请", "歌单", "播客", "文章", "博客", "论文", "研究", "实验", "模型", "训练", "评估", "内核", "编译器", "框架", "插件", "浏览器", "终端", "电脑", "显示器", "键盘", "鼠标", "打印机", "路由器", "网络", "电池", "充电器", "厨房", "冰箱", "烤箱", "窗户", "阳台", "植物", "番茄", "柠檬", "苹果", "香蕉", "橙子", "葡萄", "芒果", "米饭", "面条", "汤", "面包", "奶酪", "牛奶", "酸奶", "电影", "音乐", "书", "章节", "课程", "考试", "作业", "老师", "学生", "学校", "办公室", "经理", "同事", "团队", "计划", "目标", "预算", "发票", "订单", "快递", "包裹", "仓库", "价格", "折扣", "股票", "银行", "贷款", "税", "收据", "天气", "下雨", "晴天", "城市", "北京", "上海", "深圳", "杭州", "成都", "广州", "公园", "博物馆", "音乐会", "电影院", "超市", "商场"]
)

CJK_PARTICLES: tuple[str, ...] = ("的", "了", "在", "是", "和", "也", "都", "就", "要", "把", "给", "跟", "很", "不")
CJK_VERBS: tuple[str, ...] = ("看", "写", "买", "去", "做", "学", "用", "找", "改", "问", "想", "约", "订", "修")
CJK_PRONOUNS: tuple[str, ...] = ("我", "你", "他", "她", "我们", "他们", "大家")

TECH_TERMS: tuple[str, ...] = (
    "Python", "SQLite", "Rust", "Docker", "Linux", "GitHub", "LanceDB", "FTS5", "Redis", "Kafka",
    "React", "Go", "Java", "Excel", "Notion", "Slack", "Telegram", "OpenAI", "Ollama", "Kubernetes",
)

KNOWLEDGE_CATEGORIES: tuple[str, ...] = ("howto", "policies", "products", "people", "recipes", "travel", "tech", "faq")

_SYLLABLE_ONSETS = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
                    "br", "ch", "dr", "gr", "kl", "pl", "sh", "st", "tr", "th")
_SYLLABLE_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou", "io")
_SYLLABLE_CODAS = ("", "", "", "n", "r", "l", "s", "m", "x", "nd", "rt")

# Characters that occur as single-character CJK queries (in the word list, particles and verbs).
CJK_SINGLE_QUERY_CHARS: tuple[str, ...] = tuple(
    sorted({ch for ch in "".join(CJK_WORDS)} | set("".join(CJK_VERBS)) | {"猫", "狗", "书", "茶", "汤", "税"})
)


def pseudo_words(count: int, seed: int) -> list[str]:
    """``count`` distinct pronounceable pseudo-words (a vocabulary larger than any fixed list)."""
    rng = random.Random(seed)
    seen: set[str] = set(ENGLISH_WORDS)
    words: list[str] = []
    while len(words) < count:
        syllables = rng.randint(2, 4)
        word = "".join(
            rng.choice(_SYLLABLE_ONSETS) + rng.choice(_SYLLABLE_VOWELS) + rng.choice(_SYLLABLE_CODAS)
            for _ in range(syllables)
        )
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class ZipfSampler:
    """Draws items with probability proportional to ``1 / rank**s`` (rank 1 = the first item)."""

    def __init__(self, items: Sequence[str], s: float = 1.05) -> None:
        self.items = list(items)
        self.cum = list(accumulate(1.0 / (rank**s) for rank in range(1, len(items) + 1)))
        self.total = self.cum[-1]

    def draw(self, rng: random.Random) -> str:
        return self.items[bisect.bisect_left(self.cum, rng.random() * self.total)]

    def draw_range(self, rng: random.Random, low: int, high: int) -> str:
        """A draw restricted to ranks ``[low, high)``, still Zipf-weighted inside the range."""
        lo_w = self.cum[low - 1] if low > 0 else 0.0
        hi_w = self.cum[min(high, len(self.cum)) - 1]
        return self.items[bisect.bisect_left(self.cum, lo_w + rng.random() * (hi_w - lo_w))]


# ---------------------------------------------------------------------------- text
class TextGenerator:
    """Seeded English, Chinese and mixed note lines."""

    def __init__(self, seed: int = 7, extra_vocabulary: int = 20_000) -> None:
        self.rng = random.Random(seed)
        self.english = ZipfSampler([*ENGLISH_WORDS, *pseudo_words(extra_vocabulary, seed + 1)], s=1.05)
        self.cjk = ZipfSampler(CJK_WORDS, s=0.9)

    def english_sentence(self, rng: random.Random | None = None) -> str:
        rng = rng or self.rng
        words = [self.english.draw(rng) for _ in range(rng.randint(9, 22))]
        if rng.random() < 0.15:
            words.insert(rng.randrange(len(words)), rng.choice(TECH_TERMS))
        if rng.random() < 0.2:
            words.append(str(rng.randint(2, 2000)))
        words[0] = words[0].capitalize()
        return " ".join(words) + "."

    def chinese_sentence(self, rng: random.Random | None = None, tech: bool = False) -> str:
        rng = rng or self.rng
        parts: list[str] = [rng.choice(CJK_PRONOUNS)]
        for index in range(rng.randint(4, 9)):
            if rng.random() < 0.4:
                parts.append(rng.choice(CJK_VERBS))
            parts.append(self.cjk.draw(rng))
            if rng.random() < 0.5:
                parts.append(rng.choice(CJK_PARTICLES))
            if tech and index == 1:
                parts.append(" " + rng.choice(TECH_TERMS) + " ")
            if rng.random() < 0.15:
                parts.append("，")
        return "".join(parts).strip("，") + "。"

    def line(self, rng: random.Random | None = None) -> str:
        rng = rng or self.rng
        roll = rng.random()
        stamp = f"{rng.randint(7, 23):02d}:{rng.randint(0, 59):02d}"
        if roll < 0.6:
            return f"- {stamp} {self.english_sentence(rng)}"
        if roll < 0.9:
            return f"- {stamp} {self.chinese_sentence(rng)}"
        return f"- {stamp} {self.chinese_sentence(rng, tech=True)} {self.english_sentence(rng)}"

    def lines_for_chars(self, rng: random.Random, chars: int) -> list[str]:
        out: list[str] = []
        total = 0
        while total < chars:
            if rng.random() < 0.06:
                out.append(f"## {self.english.draw_range(rng, 100, 2000).capitalize()} {rng.choice(CJK_WORDS)}")
            line = self.line(rng)
            out.append(line)
            total += len(line) + 1
        return out


# ------------------------------------------------------------------------ workspace
@dataclass
class WorkspaceSpec:
    """How many files, how many chunks each, and how they spread over scopes."""

    files: int
    chunks_per_file: int
    seed: int = 7
    big_scope_share: float = 0.7  # one group chat holds most of the data
    knowledge_share: float = 0.1
    small_scope_files: int = 5  # MEMORY.md + 4 daily files per ordinary user scope
    last_day: date = date(2026, 11, 30)


@dataclass
class GeneratedWorkspace:
    root: Path
    spec: WorkspaceSpec
    big_scope: str
    small_scopes: list[str]
    files: int
    chars: int
    seconds: float
    today: date
    daily_files: dict[str, list[Path]] = field(default_factory=dict)

    @property
    def user_scope(self) -> str:
        """A realistic one-person scope (a handful of files)."""
        return self.small_scopes[0]


def _chars_per_chunk(gen: TextGenerator, max_chars: int = 800, overlap_lines: int = 2) -> float:
    """Characters of generated text per chunk, measured with the real chunker (overlap included)."""
    rng = random.Random(12345)
    text = "\n".join(gen.lines_for_chars(rng, 200_000)) + "\n"
    chunks = chunk_text(text, scope="s", path="p.md", max_chars=max_chars, overlap_lines=overlap_lines)
    return len(text) / max(1, len(chunks))


def _set_mtime(path: Path, when: datetime) -> None:
    stamp = when.timestamp()
    os.utime(path, (stamp, stamp))


def generate_workspace(root: Path, spec: WorkspaceSpec) -> GeneratedWorkspace:
    """Write ``spec.files`` markdown files under ``root`` (a membridge workspace in user mode).

    File mtimes are set in the past (a daily file's own day, noon), as on a real bot's disk, so the
    indexer's "written too recently to trust the mtime" window never applies.
    """
    started = time.perf_counter()
    gen = TextGenerator(spec.seed)
    per_chunk = _chars_per_chunk(gen)
    target_chars = int(spec.chunks_per_file * per_chunk)
    rng = random.Random(spec.seed)
    root.mkdir(parents=True, exist_ok=True)
    knowledge_files = max(1, round(spec.files * spec.knowledge_share))
    big_files = max(2, round(spec.files * spec.big_scope_share))
    small_scope_count = max(1, (spec.files - knowledge_files - big_files) // spec.small_scope_files)
    big_files = spec.files - knowledge_files - small_scope_count * spec.small_scope_files
    big_scope = "telegram-chat-1001"
    small_scopes = [f"telegram-{100000 + i}" for i in range(small_scope_count)]
    past = datetime.combine(spec.last_day, datetime.min.time()) - timedelta(days=1)
    written = 0
    chars = 0
    daily: dict[str, list[Path]] = {}

    def write(path: Path, lines: list[str], when: datetime) -> None:
        nonlocal written, chars
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "\n".join(lines) + "\n"
        path.write_text(body, encoding="utf-8")
        _set_mtime(path, when)
        written += 1
        chars += len(body)

    def memory_md(scope: str) -> None:
        lines = ["# MEMORY", ""] + [gen.line(rng) for _ in range(rng.randint(20, 40))]
        write(root / "scopes" / scope / "MEMORY.md", lines, past)

    def daily_files(scope: str, count: int) -> None:
        paths: list[Path] = []
        for back in range(count):
            day = spec.last_day - timedelta(days=back)
            path = root / "scopes" / scope / "memory" / f"{day.isoformat()}.md"
            lines = [f"# {day.isoformat()}", "", *gen.lines_for_chars(rng, target_chars)]
            write(path, lines, datetime.combine(day, datetime.min.time()) + timedelta(hours=12))
            paths.append(path)
        daily[scope] = paths

    memory_md(big_scope)
    daily_files(big_scope, big_files - 1)
    for scope in small_scopes:
        memory_md(scope)
        daily_files(scope, spec.small_scope_files - 1)
    for index in range(knowledge_files):
        category = KNOWLEDGE_CATEGORIES[index % len(KNOWLEDGE_CATEGORIES)]
        slug = f"{gen.english.draw_range(rng, 200, 5000)}-{index}"
        title = f"# {slug.replace('-', ' ').title()} {rng.choice(CJK_WORDS)}"
        write(root / "knowledge" / category / f"{slug}.md", [title, "", *gen.lines_for_chars(rng, target_chars)], past)
    return GeneratedWorkspace(
        root=root,
        spec=spec,
        big_scope=big_scope,
        small_scopes=small_scopes,
        files=written,
        chars=chars,
        seconds=time.perf_counter() - started,
        today=spec.last_day + timedelta(days=1),
        daily_files=daily,
    )


# -------------------------------------------------------------------------- queries
@dataclass(frozen=True)
class QuerySets:
    english: list[str]
    cjk2: list[str]
    cjk1: list[str]
    mixed: list[str]


def make_queries(count: int, seed: int = 99) -> QuerySets:
    """``count`` queries of each kind; English queries are 2-3 mid-frequency words, all distinct."""
    gen = TextGenerator(7)
    rng = random.Random(seed)
    english: list[str] = []
    seen: set[str] = set()
    while len(english) < count:
        words = [gen.english.draw_range(rng, 150, 8000) for _ in range(rng.randint(2, 3))]
        query = " ".join(words)
        if query not in seen:
            seen.add(query)
            english.append(query)
    two_char = [w for w in CJK_WORDS if len(w) == 2]
    cjk2 = ["教程"] + [two_char[i % len(two_char)] for i in range(count - 1)]
    cjk1 = [CJK_SINGLE_QUERY_CHARS[i % len(CJK_SINGLE_QUERY_CHARS)] for i in range(count)]
    mixed = ["Python 教程"] + [f"{rng.choice(TECH_TERMS)} {rng.choice(two_char)}" for _ in range(count - 1)]
    return QuerySets(english, cjk2, cjk1, mixed)


# ---------------------------------------------------------------------- measurement
def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100.0
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


@dataclass
class Latency:
    n: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    max_ms: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "p50_ms": self.p50_ms, "p95_ms": self.p95_ms, "mean_ms": self.mean_ms,
                "max_ms": self.max_ms, **self.extra}


def measure(items: Sequence[Any], call: Callable[[Any], Any], *, warmup: int = 5) -> tuple[Latency, list[Any]]:
    """Time ``call(item)`` for each item (after ``warmup`` untimed calls); returns latency and outputs."""
    for item in items[:warmup]:
        call(item)
    samples: list[float] = []
    outputs: list[Any] = []
    for item in items:
        started = time.perf_counter()
        outputs.append(call(item))
        samples.append((time.perf_counter() - started) * 1000.0)
    return Latency(len(samples), percentile(samples, 50), percentile(samples, 95), statistics.fmean(samples),
                   max(samples)), outputs


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def directory_size_mb(path: Path) -> float:
    """Size of a directory tree, or of a single file, in MiB."""
    if path.is_file():
        return path.stat().st_size / (1024 * 1024)
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(dirpath) / name).stat().st_size
    return total / (1024 * 1024)


def source_fingerprint() -> dict[str, dict[str, str]]:
    """sha256 and mtime of every module the benchmarks exercise, so a result names the code it measured."""
    import hashlib

    out: dict[str, dict[str, str]] = {}
    for package in ("memory", "bridge"):
        for path in sorted((REPO / package).glob("*.py")):
            stat = path.stat()
            out[f"{package}/{path.name}"] = {
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
                "mtime": datetime.fromtimestamp(stat.st_mtime).isoformat(timespec="seconds"),
            }
    return out


def machine_info() -> dict[str, Any]:
    def run(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    model = ""
    for line in run("lscpu").splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    import sqlite3

    try:
        import lancedb

        lancedb_version = lancedb.__version__
    except Exception:
        lancedb_version = "?"
    return {
        "date": datetime.now().isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "lancedb": lancedb_version,
        "platform": platform.platform(),
    }


# ---------------------------------------------------------------------------- report
@dataclass
class Figure:
    section: str
    name: str
    value: float
    unit: str
    target: float | None = None  # value must be <= target
    note: str = ""

    @property
    def verdict(self) -> str:
        if self.target is None:
            return ""
        return "PASS" if self.value <= self.target else "FAIL"

    def to_dict(self) -> dict[str, Any]:
        return {"section": self.section, "name": self.name, "value": self.value, "unit": self.unit,
                "target": self.target, "verdict": self.verdict or None, "note": self.note}


class Report:
    def __init__(self, title: str) -> None:
        self.title = title
        self.figures: list[Figure] = []
        self.details: dict[str, Any] = {}

    def add(self, section: str, name: str, value: float, unit: str, *, target: float | None = None,
            note: str = "") -> Figure:
        figure = Figure(section, name, value, unit, target, note)
        self.figures.append(figure)
        target_text = f"  (target <= {target:g} {unit}: {figure.verdict})" if target is not None else ""
        print(f"  [{section}] {name}: {format_value(value)} {unit}{target_text}", flush=True)
        return figure

    def table(self) -> str:
        rows = [("section", "figure", "value", "target", "")]
        for f in self.figures:
            rows.append((f.section, f.name, f"{format_value(f.value)} {f.unit}",
                         f"<= {f.target:g} {f.unit}" if f.target is not None else "", f.verdict))
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        lines = []
        for index, row in enumerate(rows):
            lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
            if index == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def write_json(self, path: Path, extra: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"title": self.title, **extra, "figures": [f.to_dict() for f in self.figures],
                   "details": self.details}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        tmp.replace(path)


def format_value(value: float) -> str:
    if value != value:  # NaN
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def iter_batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
