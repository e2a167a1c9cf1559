"""Management-consulting world: a market-entry study (market-sizing workbook,
steering-committee deck, interview notes, survey data, industry report,
mail/chat/calendar)."""

from __future__ import annotations

from apexrl.tasks.example_data import formats as F
from apexrl.tasks.example_data.spec import (
    Ctx,
    TaskSpec,
    WorldSpec,
    check,
    crit,
    fmt_money_m,
    number_crit,
    org_domain,
    slugify,
)

DOMAIN = "management-consulting"

FIRMS = ["Caldera Strategy Group", "Brightline Consulting", "Keystone Vale", "Northwind Advisory"]
CLIENTS = [
    ("Harborview Grocers", "plant-based snacks"),
    ("Pinecrest Health", "at-home diagnostics"),
    ("Oakridge Utilities", "residential solar storage"),
    ("Tallis Outdoor", "e-bike subscriptions"),
]
REGIONS = ["North", "South", "East", "West", "Central"]
BARRIERS = ["price", "availability", "awareness", "trust in the brand", "product range"]
ROLES = ["Category buyer", "Regional distributor", "Retail store manager", "Industry analyst",
         "Procurement lead", "Former competitor executive"]  # fmt: skip


def build(ctx: Ctx) -> WorldSpec:
    rng = ctx.rng
    firm = rng.choice(FIRMS)
    client, market = rng.choice(CLIENTS)
    firm_dom = org_domain(firm)
    client_dom = org_domain(client)
    team = ctx.people(firm_dom, "Partner", "Engagement Manager", "Consultant", "Business Analyst")
    partner, manager, consultant, analyst = team
    sponsor = ctx.person(client_dom, "Chief Strategy Officer")

    regions = rng.sample(REGIONS, 4)
    households = [rng.randrange(300, 2400, 10) for _ in regions]  # thousands
    penetration = [rng.choice([0.04, 0.05, 0.06, 0.08, 0.1, 0.12]) for _ in regions]
    spend = [rng.randrange(120, 480, 5) for _ in regions]  # USD per household per year
    sizes = [h * p * s / 1000 for h, p, s in zip(households, penetration, spend, strict=True)]
    total = sum(sizes)
    largest = regions[max(range(4), key=lambda i: sizes[i])]

    sizing_rows: list[list] = [["Region", "Households (k)", "Penetration", "Annual spend per "
                                "household (USD)", "Market size (USD m)"]]  # fmt: skip
    for i, r in enumerate(regions, start=2):
        h, p, s = households[i - 2], penetration[i - 2], spend[i - 2]
        sizing_rows.append([r, h, p, s, f"=B{i}*C{i}*D{i}/1000"])
    sizing_rows.append(["Total", "=SUM(B2:B5)", None, None, "=SUM(E2:E5)"])
    assumptions = [
        ["Assumption", "Value", "Source"],
        ["Base year", 2025, "Client data"],
        ["Household counts", "thousands", "National statistics office"],
        ["Penetration", "share of households buying at least once a year", "Survey"],
        ["Annual growth", 0.07, "Industry report"],
    ]
    workbook = F.xlsx_bytes(
        [
            F.Sheet(
                "Sizing",
                sizing_rows,
                {"A": 12, "B": 16, "C": 13, "D": 30, "E": 20},
                {"C": "0%", "E": "0.0"},
            ),  # fmt: skip
            F.Sheet("Assumptions", assumptions, {"A": 20, "B": 40, "C": 28}),
        ],
        title=f"{client} market sizing",
        author=analyst.name,
    )

    # --- survey ----------------------------------------------------------------------
    survey: list[list] = [["respondent_id", "region", "purchase_intent_1to5", "wtp_usd"]]
    for i in range(40):
        survey.append([f"R{i + 1:03d}", regions[i % 4], rng.randint(1, 5), rng.randrange(5, 40)])
    focus = regions[rng.randrange(4)]
    focus_rows = [r for r in survey[1:] if r[1] == focus]
    intent_share = 100.0 * sum(1 for r in focus_rows if r[2] >= 4) / len(focus_rows)

    # --- interviews -------------------------------------------------------------------
    n_int = 5
    interviewees = [ctx.person(f"interviewee{i}.example.com") for i in range(n_int)]
    int_barriers = [rng.choice(BARRIERS) for _ in range(n_int)]
    int_blocks: list[F.Block] = [("title", f"{client}: expert interview notes")]
    for i, (who, barrier) in enumerate(zip(interviewees, int_barriers, strict=True)):
        role = ROLES[i % len(ROLES)]
        int_blocks += [
            ("h1", f"Interview {i + 1}: {who.name}, {role}"),
            ("p", f"Date: {ctx.day(-15 + i):%d %B %Y}. Interviewer: {consultant.name}."),
            ("p", f"Main barrier to adoption of {market}: {barrier}."),
            ("bullet", f"Expects the {regions[i % 4]} region to move first."),
        ]
    early_top = max(BARRIERS, key=lambda b: (int_barriers.count(b), -BARRIERS.index(b)))
    interviews = F.docx_bytes(int_blocks, title="Interview notes", author=consultant.name)
    report = F.pdf_bytes(
        [
            ("title", f"The {market} market: 2025 outlook"),
            ("p", "Industry report excerpt licensed for client work."),
            ("h1", "Market dynamics"),
            ("p", f"Demand for {market} is growing about 7% a year. Penetration is highest "
                  "among urban households and remains price sensitive."),
            ("h1", "Regional view"),
            ("table", [["Region", "Households (k)"]] + [[r, str(h)] for r, h in
                                                         zip(regions, households, strict=True)]),
        ],
        title="Industry report",
        author="Sector Insights Ltd",
    )  # fmt: skip
    steerco_date = ctx.day(8)
    steerco_room = rng.choice(["Boardroom 4A", "Harbour Suite", "Level 12 Atrium", "Room 701"])
    steerco_location = f"{client} HQ, {steerco_room}"
    deck = F.pptx_bytes(
        [
            F.Slide(f"{client}: market entry for {market}", subtitle=f"{firm} | SteerCo pre-read"),
            F.Slide("Executive summary", [
                f"Addressable market of USD {fmt_money_m(total)} million across four regions",
                f"{largest} is the largest region",
                f"Most cited barrier in interviews so far: {early_top}",
            ]),
            F.Slide("Market size by region", table=[["Region", "Market size (USD m)"]] + [
                [r, fmt_money_m(s)] for r, s in zip(regions, sizes, strict=True)]),
            F.Slide("Next steps", [f"SteerCo on {steerco_date:%d %B %Y}",
                                   "Complete remaining expert interviews",
                                   "Prioritise launch regions"]),
        ],
        title="SteerCo deck",
        author=manager.name,
    )  # fmt: skip
    index_md = (
        f"# {client} market entry ({market})\n\n"
        "- Analysis/Market_Sizing.xlsx: bottom-up sizing by region\n"
        "- Data/survey_results.csv: consumer survey (n=40)\n"
        "- Interviews/Interview_Notes.docx: expert interviews\n"
        "- Research/Industry_Report.pdf: third-party report\n"
        "- Deliverables/SteerCo_Deck.pptx: steering committee pre-read\n"
    ).encode()
    fs = {
        "Analysis/Market_Sizing.xlsx": workbook,
        "Data/survey_results.csv": F.csv_bytes(survey),
        "Interviews/Interview_Notes.docx": interviews,
        "Research/Industry_Report.pdf": report,
        "Deliverables/SteerCo_Deck.pptx": deck,
        "README.md": index_md,
        "Interviews/interview_schedule.txt": "".join(
            f"{ctx.day(-15 + i).isoformat()}  {w.name}\n" for i, w in enumerate(interviewees)
        ).encode(),
    }

    mid = lambda k: ctx.message_id(k, firm_dom)  # noqa: E731
    s1, s2, s3 = mid("steerco"), mid("steerco-re"), mid("steerco-re2")
    i1, i2 = mid("interviews"), mid("interviews-re")
    mails = [
        F.Mail(s1, manager.pair, [sponsor.pair], "SteerCo logistics", ctx.at(1, 9),
               f"Hi {sponsor.first}, confirming the SteerCo on {steerco_date:%d %B}. Could you "
               "confirm the room?", cc=[partner.pair]),
        F.Mail(s2, sponsor.pair, [manager.pair], "Re: SteerCo logistics", ctx.at(1, 11),
               f"We have booked {steerco_room} at our HQ.", in_reply_to=s1, references=[s1]),
        F.Mail(s3, manager.pair, [sponsor.pair], "Re: SteerCo logistics", ctx.at(1, 12),
               "Perfect, thank you.", in_reply_to=s2, references=[s1, s2]),
        F.Mail(i1, consultant.pair, [manager.pair], "Interview programme status", ctx.at(0, 17),
               f"{n_int} interviews done, notes in Interviews/. More scheduled next week."),
        F.Mail(i2, manager.pair, [consultant.pair], "Re: Interview programme status",
               ctx.at(0, 18), "Great - please tally the barriers once the next batch is in.",
               in_reply_to=i1, references=[i1]),
    ]  # fmt: skip
    events = [
        F.Event(ctx.hex("cal", "steerco"), f"{client} steering committee", ctx.at(8, 14),
                ctx.at(8, 16), steerco_location, [p.pair for p in team] + [sponsor.pair],
                manager.pair, "Market sizing and interview findings"),
        F.Event(ctx.hex("cal", "dryrun"), "SteerCo dry run", ctx.at(7, 10), ctx.at(7, 11),
                f"{firm} office, Room 3", [p.pair for p in team], manager.pair),
    ]  # fmt: skip
    space = F.ChatSpace(
        f"space_{ctx.hex('space', 'case', n=12)}",
        f"{client} case team",
        [p.pair for p in team],
        [
            F.ChatMessage(ctx.hex("chat", 1, n=16), analyst.pair, ctx.at(0, 10),
                          "Sizing model updated with the new household counts.", "t1"),
            F.ChatMessage(ctx.hex("chat", 2, n=16), manager.pair, ctx.at(0, 10, 15),
                          "Thanks. Total should tie to the SteerCo deck.", "t1"),
            F.ChatMessage(ctx.hex("chat", 3, n=16), partner.pair, ctx.at(1, 12, 30),
                          f"SteerCo confirmed in {steerco_room}.", "t2",
                          [F.reaction("\N{PARTY POPPER}", manager.email, analyst.email)]),
        ],
    )  # fmt: skip
    users = {f"user_{ctx.hex('user', p.email, n=12)}": p.pair for p in team}
    files = {f"filesystem/{k}": v for k, v in fs.items()} | {
        ".apps_data/mail/inbox.mbox": F.mbox_bytes(mails),
        ".apps_data/calendar/case_team.ics": F.ics_bytes(events, calendar_name=f"{client} case"),
        **{f".apps_data/chat/{k}": v for k, v in F.chat_files([space], users).items()},
    }

    tasks: list[TaskSpec] = []
    tasks.append(
        TaskSpec(
            key="total-market",
            task_name="Total addressable market",
            prompt=(
                "From Analysis/Market_Sizing.xlsx, what is the total addressable market across "
                "all regions (USD millions), and which region is the largest?"
            ),
            rubric=[
                number_crit(
                    1,
                    f"States a total market of about USD {fmt_money_m(total)} million",
                    value=round(total, 1),
                    tolerance=0.1,
                ),
                crit(2, f"Names {largest} as the largest region", check("exact", value=largest)),
                crit(3, "Explains the sizing as households x penetration x spend"),
            ],  # fmt: skip
            gold_response=(
                f"The total addressable market is USD {fmt_money_m(total)} million "
                f"(households x penetration x annual spend, summed over four regions). "
                f"{largest} is the largest region at USD "
                f"{fmt_money_m(max(sizes))} million."
            ),
        )
    )
    tasks.append(
        TaskSpec(
            key="survey-intent",
            task_name=f"Purchase intent in the {focus} region",
            prompt=(
                f"In Data/survey_results.csv, what percentage of respondents in the {focus} "
                "region have a purchase intent of 4 or 5?"
            ),
            rubric=[
                number_crit(
                    1, f"States {intent_share:.1f}%", value=round(intent_share, 1), tolerance=0.5
                ),
                crit(2, f"Bases the figure on the {len(focus_rows)} {focus} respondents"),
            ],  # fmt: skip
            gold_response=(
                f"{intent_share:.1f}% of the {len(focus_rows)} respondents in {focus} have a "
                "purchase intent of 4 or 5."
            ),
            expected_output=None,
        )
    )
    ranked = sorted(zip(regions, sizes, strict=True), key=lambda t: -t[1])
    summary_csv = F.csv_bytes(
        [["region", "market_size_usd_m"]] + [[r, fmt_money_m(s)] for r, s in ranked]
    )
    tasks.append(
        TaskSpec(
            key="market-table",
            task_name="Market size table for the SteerCo",
            prompt=(
                "Create outputs/market_summary.csv with one row per region (columns region, "
                "market_size_usd_m) sorted from largest to smallest market, using the sizing "
                "workbook."
            ),
            rubric=[
                crit(
                    1,
                    "Creates outputs/market_summary.csv",
                    check("file_exists", path="outputs/market_summary.csv"),
                ),
                crit(
                    2,
                    f"First data row is {largest}",
                    check(
                        "file_contains",
                        path="outputs/market_summary.csv",
                        value=f"{largest},{fmt_money_m(max(sizes))}",
                    ),
                ),
                crit(
                    3,
                    "Has the header region,market_size_usd_m",
                    check(
                        "file_contains",
                        path="outputs/market_summary.csv",
                        value="region,market_size_usd_m",
                    ),
                ),
                crit(4, "Sorted from largest to smallest"),
            ],  # fmt: skip
            gold_response="Wrote outputs/market_summary.csv.",
            gold_response_type="file",
            expected_output="make_new_doc",
            gold_files={"outputs/market_summary.csv": summary_csv},
        )
    )
    new_barriers = [rng.choice(BARRIERS) for _ in range(3)]
    new_people = [ctx.person(f"interviewee{n_int + i}.example.com") for i in range(3)]
    new_notes = f"# Additional interviews ({client})\n\n" + "".join(
        f"## {p.name}, {ROLES[(n_int + i) % len(ROLES)]}\n\nMain barrier: {b}.\n\n"
        for i, (p, b) in enumerate(zip(new_people, new_barriers, strict=True))
    )
    all_barriers = int_barriers + new_barriers
    price_count = all_barriers.count("price")
    counts = {b: all_barriers.count(b) for b in BARRIERS}
    top_barrier = max(BARRIERS, key=lambda b: (counts[b], -BARRIERS.index(b)))
    tally = "; ".join(f"{b}: {counts[b]}" for b in BARRIERS if counts[b])
    synthesis = (
        f"# Interview synthesis\n\nAcross {len(all_barriers)} interviews, barriers cited: "
        f"{tally}. Price was cited {price_count} times. Most cited: {top_barrier}.\n"
    )
    tasks.append(
        TaskSpec(
            key="interview-synthesis",
            task_name="Tally adoption barriers across all interviews",
            prompt=(
                "Three more interviews were written up (inputs/new_interviews.md). Combining them "
                "with Interviews/Interview_Notes.docx, how many interviewees in total cite price "
                "as the main barrier, and which barrier is cited most? Write a short synthesis "
                "to outputs/interview_synthesis.md and summarise it in your answer."
            ),
            rubric=[
                number_crit(
                    1,
                    f"States that {price_count} interviewees cite price",
                    value=float(price_count),
                    tolerance=0.0,
                ),
                crit(2, f"Covers all {len(all_barriers)} interviews"),
                crit(
                    3,
                    f"Identifies {top_barrier} as the most cited barrier",
                    check("exact", value=top_barrier),
                ),
                crit(
                    4,
                    "Writes outputs/interview_synthesis.md",
                    check("file_exists", path="outputs/interview_synthesis.md"),
                ),
                crit(
                    5,
                    "The synthesis file states the price count",
                    check(
                        "file_contains",
                        path="outputs/interview_synthesis.md",
                        value=f"Price was cited {price_count} times",
                    ),
                ),
                crit(6, "Gives a per-barrier tally"),
            ],  # fmt: skip
            gold_response=(
                f"Across all {len(all_barriers)} interviews, {price_count} cite price as the "
                f"main barrier; the most cited barrier is {top_barrier}. Tally: {tally}. "
                "Synthesis saved to outputs/interview_synthesis.md."
            ),
            gold_response_type="file",
            expected_output="make_new_doc",
            input_files={"filesystem/inputs/new_interviews.md": new_notes.encode()},
            gold_files={"outputs/interview_synthesis.md": synthesis.encode()},
        )
    )
    tasks.append(
        TaskSpec(
            key="steerco-logistics",
            task_name="When and where is the SteerCo",
            prompt="When and where is the client steering committee meeting?",
            rubric=[
                crit(1, f"Gives the location {steerco_room}", check("exact", value=steerco_room)),
                crit(2, f"Gives the date {steerco_date:%d %B %Y} at 14:00 UTC"),
            ],  # fmt: skip
            gold_response=(
                f"The steering committee is on {steerco_date:%d %B %Y}, 14:00-16:00 UTC, at "
                f"{steerco_location}."
            ),
        )
    )
    return WorldSpec(
        domain=DOMAIN,
        short_name=slugify(firm),
        description=(
            f"{firm} case team sizing the {market} market for {client}: sizing workbook, survey, "
            "interview notes, industry report, SteerCo deck, mail, chat and calendar."
        ),
        apps=["files", "docs", "sheets", "slides", "pdf", "mail", "chat", "calendar", "code"],
        files=files,
        tasks=tasks,
    )
