"""What the console's browser tests put in a workspace: a small one, and a person's first days."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

TOKENS = {"token": "read-tok", "admin_token": "admin-tok"}
V1 = b"- likes tea\n"
V2 = b"- likes tea\n- lives in Lisbon\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def days_ago(days: int) -> str:
    return (date.today() - timedelta(days=days)).isoformat()


# A person's first days with the bot, in English and Chinese, for searches by meaning (the local
# multilingual model) and for the screenshots in docs/console/.
DEMO_DAYS = {
    45: "- asked about train times to Braga\n",
    20: "- the car is due for inspection in March\n- renewed the passport\n",
    3: "- bike lock code is 4711\n- my birthday is on May 3\n- the dentist moved to Friday 9:00\n",
    2: "- 我的生日是五月三日\n",
    1: "- switched the internet to Fibra Porto, see the contacts/isp page\n- Miso the cat hates the vacuum\n",
    0: "- booked flights to Porto for June\n",
}
DEMO_MEMORY = b"- likes tea\n- bike lock code is 4711\n"
# What the model answers the demo's Deep Dream (a real one, over the days above).
DEMO_DREAM = ("[MEMORY]\n- likes green tea, no sugar\n- bike lock code is 4711\n- lives in Porto since May\n"
              "[DREAM]\nMerged the two tea notes into one; kept the bike lock code; Porto is home now.\n")
DEMO_PAGES = {
    "contacts/isp": "# Internet provider\nFibra Porto, support line +351 220 000 000.\nThe router: [[home/router]].\n",
    "home/router": "# Home router\nIn the hall cupboard; admin page at 192.168.1.1.\nProvider: [[contacts/isp]].\n",
    "pets/miso": "# Miso\nA grey cat, born 2021. Hates the vacuum. Vet: see [[contacts/vet]].\n",
    "contacts/vet": "# Vet\nDr. Sousa, Rua das Flores 12.\n",
}
