"""Investment-banking world: a sell-side M&A mandate (deal model, pitch deck, CIM,
buyer list, deal-team mail/chat/calendar) and its tasks."""

from __future__ import annotations

import statistics

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

DOMAIN = "investment-banking"

BANKS = ["Meridian Capital", "Halvorsen Pike", "Northgate Partners", "Ashcombe Securities"]
TARGETS = [
    ("Corvina Foods", "packaged foods", ["Snacks", "Beverages", "Frozen", "Food Service"]),
    ("Bluepeak Logistics", "logistics", ["Freight", "Warehousing", "Last Mile", "Customs"]),
    ("Tessellate Software", "software", ["Licences", "Subscriptions", "Services", "Support"]),
    ("Harrow Medical", "medical devices", ["Implants", "Diagnostics", "Consumables", "Repair"]),
]
CODENAMES = ["Falcon", "Kestrel", "Atlas", "Juniper", "Orion", "Sequoia"]
COMPS_POOL = [
    "Alder Group", "Brightstone plc", "Cascade Holdings", "Dunmore Inc.", "Everly Corp.",
    "Foxglove SA", "Granite Peak Co.", "Hollis & Webb",
]  # fmt: skip
BIDDERS_POOL = [
    ("Crestline Equity", "Financial sponsor"),
    ("Palisade Partners", "Financial sponsor"),
    ("Vantor Industries", "Strategic"),
    ("Oberon Group", "Strategic"),
    ("Lakemont Capital", "Financial sponsor"),
    ("Sterling Rowe Holdings", "Strategic"),
]
YEARS = ["FY2022A", "FY2023A", "FY2024A", "FY2025E", "FY2026E"]
COLS = ["B", "C", "D", "E", "F"]


def build(ctx: Ctx) -> WorldSpec:
    rng = ctx.rng
    bank = rng.choice(BANKS)
    target, sector, segments = rng.choice(TARGETS)
    codename = f"Project {rng.choice(CODENAMES)}"
    bank_dom = org_domain(bank)
    client_dom = org_domain(target)
    team = ctx.people(bank_dom, "Managing Director", "Vice President", "Associate", "Analyst")
    md, vp, assoc, analyst = team
    cfo, ceo = ctx.people(client_dom, "Chief Financial Officer", "Chief Executive Officer")

    # --- financials (USD millions) -------------------------------------------------
    base = [rng.randrange(40, 160) for _ in segments]
    growth = [rng.choice([0.04, 0.06, 0.08, 0.1, 0.12]) for _ in segments]
    seg_rev = []  # per segment, per year (integers)
    for b, g in zip(base, growth, strict=True):
        row = [b]
        for _ in YEARS[1:]:
            row.append(round(row[-1] * (1 + g)))
        seg_rev.append(row)
    margins = [rng.choice([0.16, 0.17, 0.18, 0.19, 0.2, 0.21, 0.22]) for _ in YEARS]
    totals = [sum(seg_rev[s][y] for s in range(len(segments))) for y in range(len(YEARS))]
    ebitda = [totals[y] * margins[y] for y in range(len(YEARS))]
    y25 = YEARS.index("FY2025E")
    y24 = YEARS.index("FY2024A")
    total_2025 = totals[y25]
    ltm_ebitda = ebitda[y24]

    fin_rows: list[list] = [["USD millions", *YEARS]]
    for s, name in enumerate(segments):
        fin_rows.append([name, *seg_rev[s]])
    n = len(segments)
    fin_rows.append(["Total revenue", *[f"=SUM({c}2:{c}{n + 1})" for c in COLS]])
    fin_rows.append(["EBITDA margin", *margins])
    fin_rows.append(["EBITDA", *[f"={c}{n + 2}*{c}{n + 3}" for c in COLS]])
    ebitda_row = n + 4

    comps = rng.sample(COMPS_POOL, 5)
    comp_rows: list[list] = [["Company", "Enterprise value", "LTM EBITDA", "EV/EBITDA"]]
    multiples = []
    for i, name in enumerate(comps, start=2):
        ev_ebitda = rng.randrange(60, 260)
        mult = rng.choice([7.5, 8.0, 8.5, 9.0, 9.5, 10.0, 10.5, 11.0, 12.0])
        ev = round(ev_ebitda * mult)
        multiples.append(ev / ev_ebitda)
        comp_rows.append([name, ev, ev_ebitda, f"=B{i}/C{i}"])
    comp_rows.append(["Median", None, None, "=MEDIAN(D2:D6)"])
    comp_rows.append(["Mean", None, None, "=AVERAGE(D2:D6)"])
    median_mult = statistics.median(multiples)
    implied_ev = median_mult * ltm_ebitda

    val_rows: list[list] = [
        ["Item", "Value"],
        ["LTM EBITDA (FY2024A)", f"=Financials!D{ebitda_row}"],
        ["Median EV/EBITDA (comps)", "=Comps!D7"],
        ["Implied enterprise value", "=B2*B3"],
    ]
    model = F.xlsx_bytes(
        [
            F.Sheet("Financials", fin_rows, {"A": 22, **{c: 12 for c in COLS}}),
            F.Sheet("Comps", comp_rows, {"A": 22, "B": 16, "C": 14, "D": 12}, {"D": "0.00x"}),
            F.Sheet("Valuation", val_rows, {"A": 30, "B": 14}, {"B": "0.0"}),
        ],
        title=f"{codename} deal model",
        author=analyst.name,
    )

    # --- bidders --------------------------------------------------------------------
    bidders = rng.sample(BIDDERS_POOL, 5)
    bids = [round(implied_ev * rng.uniform(0.82, 1.08), 1) for _ in bidders]
    # One bidder revises by email to above the best initial bid.
    best_initial = max(bids)
    reviser_idx = min(range(len(bids)), key=lambda i: bids[i])  # the lowest bidder revises
    revised_bid = round(best_initial + rng.choice([4.5, 6.0, 7.5, 9.0]), 1)
    final_bids = list(bids)
    final_bids[reviser_idx] = revised_bid
    top_idx = max(range(len(final_bids)), key=lambda i: final_bids[i])
    top_bidder = bidders[top_idx][0]
    initial_top = bidders[max(range(len(bids)), key=lambda i: bids[i])][0]
    buyer_csv = F.csv_bytes(
        [["bidder", "type", "contacted", "nda_signed", "ioi_usd_m", "status"]]
        + [
            [name, kind, ctx.day(-10 + i).isoformat(), "yes", fmt_money_m(bid), "IOI received"]
            for i, ((name, kind), bid) in enumerate(zip(bidders, bids, strict=True))
        ]
    )
    reviser = bidders[reviser_idx][0]
    reviser_contact = ctx.person(org_domain(reviser), "Partner")

    # --- CIM (pdf) ------------------------------------------------------------------
    cim_table = [["Segment", *YEARS]]
    cim_table += [[s, *map(str, seg_rev[i])] for i, s in enumerate(segments)]
    cim_table += [["Total revenue", *map(str, totals)]]
    cim = F.pdf_bytes(
        [
            ("title", f"{codename}: Confidential Information Memorandum"),
            ("p", f"Prepared by {bank} on behalf of {target}. Strictly private and confidential."),
            ("h1", "1. Business overview"),
            (
                "p",
                f"{target} is a {sector} company with four reporting segments: "
                f"{', '.join(segments)}. FY2024A revenue was USD {totals[y24]} million with "
                f"an EBITDA margin of {margins[y24]:.0%}.",
            ),
            ("h1", "2. Historical and projected financials (USD millions)"),
            ("table", cim_table),
            ("h1", "3. Management"),
            ("bullet", f"{ceo.name}, Chief Executive Officer"),
            ("bullet", f"{cfo.name}, Chief Financial Officer"),
            ("h1", "4. Process"),
            (
                "p",
                f"Indications of interest were due on {ctx.day(0):%d %B %Y}. Management "
                f"presentations follow on {ctx.day(6):%d %B %Y}.",
            ),
        ],
        title=f"{codename} CIM",
        author=bank,
    )

    # --- pitch deck (pptx) ----------------------------------------------------------
    deck = F.pptx_bytes(
        [
            F.Slide(f"{codename}: Board discussion materials", subtitle=f"{bank} | {target}"),
            F.Slide(
                "Situation overview",
                [
                    f"{target} is exploring a sale of 100% of its equity",
                    f"FY2025E revenue of USD {total_2025} million across {n} segments",
                    f"{len(bidders)} parties submitted indications of interest",
                ],
            ),
            F.Slide(
                "Trading comparables",
                table=[["Company", "EV (USD m)", "EV/EBITDA"]]
                + [
                    [c, str(comp_rows[i + 1][1]), f"{multiples[i]:.2f}x"]
                    for i, c in enumerate(comps)
                ],
            ),
            F.Slide(
                "Next steps",
                [
                    f"Management presentations week of {ctx.day(6):%d %B}",
                    f"Final bids due {ctx.day(20):%d %B %Y}",
                    "Board to select preferred bidder",
                ],
            ),
        ],
        title=f"{codename} board deck",
        author=vp.name,
    )

    engagement = F.docx_bytes(
        [
            ("title", "Engagement letter"),
            ("p", f"{bank} is engaged by {target} as exclusive financial adviser for {codename}."),
            ("h1", "Fees"),
            ("p", "A success fee of 1.25% of the transaction value, payable at closing."),
            ("p", "A monthly retainer of USD 75,000, credited against the success fee."),
            ("h1", "Deal team"),
            *[("bullet", f"{p.name}, {p.title}") for p in team],
        ],
        title=f"{codename} engagement letter",
        author=md.name,
    )

    notes = (
        f"# {codename} deal-team notes\n\n"
        f"- Client: {target} ({sector})\n"
        f"- Deal model: Deal_Model/{codename.replace(' ', '_')}_Model.xlsx "
        "(tabs Financials, Comps, Valuation)\n"
        "- Bid tracker: Process/buyer_list.csv (initial IOIs only; check mail for revisions)\n"
        f"- Staffing: {', '.join(p.name for p in team)}\n"
    ).encode()

    model_path = f"Deal_Model/{codename.replace(' ', '_')}_Model.xlsx"
    fs = {
        model_path: model,
        "Marketing/CIM.pdf": cim,
        "Marketing/Board_Discussion_Materials.pptx": deck,
        "Process/buyer_list.csv": buyer_csv,
        "Legal/Engagement_Letter.docx": engagement,
        "README.md": notes,
        "Process/timeline.txt": (
            f"IOI deadline: {ctx.day(0).isoformat()}\n"
            f"Management presentation: {ctx.day(6).isoformat()}\n"
            f"Final bids: {ctx.day(20).isoformat()}\n"
        ).encode(),
    }

    # --- mail ----------------------------------------------------------------------
    mid = lambda k: ctx.message_id(k, bank_dom)  # noqa: E731
    t1, t2, t3 = mid("ioi-summary"), mid("ioi-summary-re1"), mid("ioi-summary-re2")
    r1 = ctx.message_id("revised-bid", reviser_contact.email.split("@")[1])
    r2 = mid("revised-bid-fwd")
    m1, m2 = mid("model-update"), mid("model-update-re")
    mails = [
        F.Mail(t1, analyst.pair, [vp.pair, md.pair], f"{codename} - IOIs received",
               ctx.at(0, 18),
               f"Team,\n\nAll {len(bidders)} IOIs are in and logged in Process/buyer_list.csv. "
               f"Highest initial indication is from {initial_top}.\n\nBest,\n{analyst.first}"),
        F.Mail(t2, vp.pair, [analyst.pair, md.pair], f"Re: {codename} - IOIs received",
               ctx.at(0, 19), "Thanks. Please keep the tracker current as revisions come in.",
               in_reply_to=t1, references=[t1]),
        F.Mail(t3, md.pair, [vp.pair, analyst.pair], f"Re: {codename} - IOIs received",
               ctx.at(1, 8, 30), f"Good. Let's walk {cfo.name} through the range on Thursday.",
               in_reply_to=t2, references=[t1, t2]),
        F.Mail(r1, reviser_contact.pair, [md.pair], f"{codename} - revised indication",
               ctx.at(2, 16),
               f"Dear {md.first},\n\nFollowing further diligence, {reviser} revises its "
               f"indication of interest to USD {fmt_money_m(revised_bid)} million for 100% of "
               f"the equity of {target}, on a cash-free, debt-free basis.\n\n"
               f"Regards,\n{reviser_contact.name}"),
        F.Mail(r2, md.pair, [vp.pair, analyst.pair, assoc.pair],
               f"Fwd: {codename} - revised indication", ctx.at(2, 17),
               f"FYI - {reviser} has revised. The tracker has not been updated yet.",
               in_reply_to=r1, references=[r1]),
        F.Mail(m1, assoc.pair, [vp.pair], f"{codename} model v7", ctx.at(-3, 11),
               f"Uploaded {model_path}. Comps refreshed; valuation tab uses the comps median "
               "on FY2024A EBITDA."),
        F.Mail(m2, vp.pair, [assoc.pair], f"Re: {codename} model v7", ctx.at(-3, 12),
               "Looks good, thanks.", in_reply_to=m1, references=[m1]),
    ]  # fmt: skip
    everyone = [p.pair for p in team]
    events = [
        F.Event(ctx.hex("cal", "ioi"), f"{codename}: IOI deadline", ctx.at(0, 17),
                ctx.at(0, 17, 30), "Virtual data room", everyone, md.pair),
        F.Event(ctx.hex("cal", "mp"), f"{codename}: management presentation", ctx.at(6, 9),
                ctx.at(6, 12), f"{target} headquarters, Board Room 2",
                everyone + [ceo.pair, cfo.pair], md.pair),
        F.Event(ctx.hex("cal", "final"), f"{codename}: final bids due", ctx.at(20, 12),
                ctx.at(20, 12, 30), "Virtual data room", everyone, md.pair),
        F.Event(ctx.hex("cal", "cfo"), f"{codename}: IOI review with {cfo.name}", ctx.at(3, 15),
                ctx.at(3, 16), f"{bank} offices, Room 14", everyone[:2] + [cfo.pair], md.pair),
    ]  # fmt: skip
    users = {f"user_{ctx.hex('user', p.email, n=12)}": p.pair for p in team}
    space = F.ChatSpace(
        f"space_{ctx.hex('space', 'deal', n=12)}",
        f"{codename} deal team",
        everyone,
        [
            F.ChatMessage(ctx.hex("chat", 1, n=16), analyst.pair, ctx.at(0, 18, 5),
                          "IOIs logged in the buyer list.", "t1"),
            F.ChatMessage(ctx.hex("chat", 2, n=16), md.pair, ctx.at(2, 17, 5),
                          f"{reviser} revised their IOI by email - see my forward.", "t2",
                          [F.reaction("\N{EYES}", vp.email)]),
            F.ChatMessage(ctx.hex("chat", 3, n=16), vp.pair, ctx.at(2, 17, 20),
                          "Noted. We'll need a clean bid summary for the board.", "t2"),
        ],
    )  # fmt: skip
    apps = {
        ".apps_data/mail/inbox.mbox": F.mbox_bytes(mails),
        ".apps_data/calendar/deal_team.ics": F.ics_bytes(events, calendar_name=codename),
        **{f".apps_data/chat/{k}": v for k, v in F.chat_files([space], users).items()},
    }
    files = {f"filesystem/{k}": v for k, v in fs.items()} | apps

    # --- tasks -----------------------------------------------------------------------
    tasks: list[TaskSpec] = []
    tasks.append(
        TaskSpec(
            key="fy2025-revenue",
            task_name=f"{codename}: FY2025E total revenue",
            prompt=(
                f"Using the Financials tab of {model_path}, what is {target}'s total FY2025E "
                "revenue? Give the figure in USD millions."
            ),
            rubric=[
                number_crit(
                    1,
                    f"States FY2025E total revenue of USD {total_2025} million",
                    value=float(total_2025),
                    tolerance=0.5,
                ),
                crit(2, "Expresses the figure in USD millions"),
            ],  # fmt: skip
            gold_response=f"{target}'s total FY2025E revenue is USD {total_2025} million "
            f"(sum of the {n} segments in the Financials tab).",
        )
    )
    tasks.append(
        TaskSpec(
            key="implied-ev",
            task_name=f"{codename}: implied enterprise value from comps",
            prompt=(
                "What is the median EV/EBITDA multiple of the trading comparables in the deal "
                f"model, and what enterprise value does it imply for {target} when applied to "
                "FY2024A EBITDA? Show the inputs you used."
            ),
            rubric=[
                number_crit(
                    1,
                    f"States an implied enterprise value of about USD "
                    f"{fmt_money_m(implied_ev)} million",
                    value=round(implied_ev, 1),
                    tolerance=1.0,
                ),
                number_crit(
                    2,
                    f"States the median multiple of {median_mult:.2f}x",
                    value=round(median_mult, 2),
                    tolerance=0.01,
                ),
                crit(3, f"Uses FY2024A EBITDA of USD {fmt_money_m(ltm_ebitda)} million"),
            ],  # fmt: skip
            gold_response=(
                f"The median EV/EBITDA of the five comparables is {median_mult:.2f}x. Applied "
                f"to FY2024A EBITDA of USD {fmt_money_m(ltm_ebitda)} million, the implied "
                f"enterprise value is USD {fmt_money_m(implied_ev)} million."
            ),
            expected_output=None,
        )
    )
    tasks.append(
        TaskSpec(
            key="top-bidder",
            task_name=f"{codename}: highest indication after revisions",
            prompt=(
                "Which bidder currently has the highest indication of interest for "
                f"{target}, taking into account any revisions received by email, and at what "
                "value?"
            ),
            rubric=[
                crit(
                    1,
                    f"Identifies {top_bidder} as the highest bidder",
                    check("exact", value=top_bidder),
                ),
                number_crit(
                    2,
                    f"States the indication of USD {fmt_money_m(revised_bid)} million",
                    value=revised_bid,
                    tolerance=0.05,
                ),
                crit(
                    3,
                    f"Notes that the revision superseded {reviser}'s initial IOI of "
                    f"USD {fmt_money_m(bids[reviser_idx])} million",
                ),
                crit(4, "Does not rely solely on the outdated buyer_list.csv"),
            ],  # fmt: skip
            gold_response=(
                f"{top_bidder} now has the highest indication at USD "
                f"{fmt_money_m(revised_bid)} million. It revised its initial IOI of USD "
                f"{fmt_money_m(bids[reviser_idx])} million by email; the buyer list still shows "
                "the initial figure."
            ),
        )
    )
    order = sorted(range(len(bidders)), key=lambda i: -final_bids[i])
    memo_rows = [["Bidder", "Type", "Indication (USD m)"]] + [
        [bidders[i][0], bidders[i][1], fmt_money_m(final_bids[i])] for i in order
    ]
    memo = F.docx_bytes(
        [
            ("title", f"{codename}: summary of indications of interest"),
            ("p", f"To: {cfo.name}, {target}. From: {md.name}, {bank}."),
            ("p", f"We received {len(bidders)} indications. The highest is from {top_bidder} at "
                  f"USD {fmt_money_m(final_bids[top_idx])} million (revised)."),
            ("table", memo_rows),
            ("p", f"The comps-implied enterprise value is USD {fmt_money_m(implied_ev)} million."),
        ],
        title=f"{codename} bid summary",
        author=md.name,
    )  # fmt: skip
    tasks.append(
        TaskSpec(
            key="bid-summary-memo",
            task_name=f"{codename}: bid summary memo for the client",
            prompt=(
                f"Prepare a short memo for {cfo.name} summarising every indication of interest "
                "(including any revisions received by email), ranked from highest to lowest, and "
                "compare them with the comps-implied enterprise value. Save it as "
                "outputs/bid_summary.docx."
            ),
            rubric=[
                crit(
                    1,
                    "Creates outputs/bid_summary.docx",
                    check("file_exists", path="outputs/bid_summary.docx"),
                ),
                crit(
                    2,
                    f"The memo names {top_bidder} as the highest bidder",
                    check("file_contains", path="outputs/bid_summary.docx", value=top_bidder),
                ),
                crit(3, "Lists all five bidders ranked from highest to lowest indication"),
                crit(4, "Compares the bids with the comps-implied enterprise value"),
            ],  # fmt: skip
            gold_response="Saved the bid summary memo to outputs/bid_summary.docx.",
            gold_response_type="file",
            expected_output="make_new_doc",
            gold_files={"outputs/bid_summary.docx": memo},
        )
    )
    # Updated management case delivered with the task.
    bump = [rng.choice([-6, -3, 2, 4, 7, 9]) for _ in segments]
    new_2025 = [seg_rev[s][y25] + bump[s] for s in range(n)]
    new_total = sum(new_2025)
    delta = new_total - total_2025
    case_csv = F.csv_bytes(
        [["segment", "fy2025e_revenue_usd_m"]]
        + [[s, v] for s, v in zip(segments, new_2025, strict=True)]
    )
    tasks.append(
        TaskSpec(
            key="updated-case",
            task_name=f"{codename}: update FY2025E revenue for the new management case",
            prompt=(
                f"{cfo.name} sent an updated management case (inputs/management_case_v2.csv). "
                "What is the revised FY2025E total revenue, and how much does it differ from the "
                "deal model's FY2025E total? Answer in USD millions."
            ),
            rubric=[
                number_crit(
                    1,
                    f"States revised FY2025E revenue of USD {new_total} million",
                    value=float(new_total),
                    tolerance=0.5,
                ),
                number_crit(
                    2,
                    f"States the change versus the model of {delta:+d} million",
                    value=float(delta),
                    tolerance=0.5,
                ),
                crit(3, "Identifies which segments changed"),
            ],  # fmt: skip
            gold_response=(
                f"Revised FY2025E revenue is USD {new_total} million versus USD {total_2025} "
                f"million in the deal model, a change of {delta:+d} million. Changed segments: "
                + ", ".join(f"{s} ({b:+d})" for s, b in zip(segments, bump, strict=True) if b)
                + "."
            ),
            input_files={"filesystem/inputs/management_case_v2.csv": case_csv},
        )
    )
    return WorldSpec(
        domain=DOMAIN,
        short_name=slugify(bank),
        description=(
            f"{bank} deal team advising {target} ({sector}) on a sale process ({codename}): "
            "deal model, CIM, board deck, bid tracker, deal-team mail, chat and calendar."
        ),
        apps=["files", "docs", "sheets", "slides", "pdf", "mail", "chat", "calendar", "code"],
        files=files,
        tasks=tasks,
    )
