"""Law world: a firm advising a client on a master services agreement (contract,
case-law research, billing workbook, client-update deck, mail/chat/calendar)."""

from __future__ import annotations

from apexrl.tasks.example_data import formats as F
from apexrl.tasks.example_data.spec import (
    Ctx,
    TaskSpec,
    WorldSpec,
    check,
    crit,
    number_crit,
    org_domain,
    slugify,
)

DOMAIN = "law"

FIRMS = ["Whitcombe Reyes LLP", "Harlan Voss LLP", "Pemberton Clarke LLP", "Okafor Lind LLP"]
CLIENTS = ["Solstice Robotics Inc.", "Brightwater Clinics LLC", "Verdant Grid Corp.",
           "Aldergate Retail Inc."]  # fmt: skip
VENDORS = ["Nimbus Cloud Services Inc.", "Ironclad Data Systems LLC", "Quorum IT Solutions Inc."]
STATES = ["New York", "Delaware", "California", "Illinois"]
CASES = [
    ("Harbin v. Castellan Systems", "212 F.4th 88 (2d Cir. 2023)",
     "A limitation-of-liability cap tied to fees paid is enforceable between sophisticated "
     "parties, but does not shield gross negligence or wilful misconduct."),
    ("Marlow Health v. Datavance", "98 N.Y.3d 301 (2022)",
     "Carve-outs for data-breach losses must be express; a general cap applies absent clear "
     "language."),
    ("Ridgeway Foods v. Tallon Logistics", "45 A.3d 712 (Del. 2021)",
     "Termination-for-convenience clauses are read strictly: notice given short of the "
     "contractual period is ineffective until the period runs."),
]  # fmt: skip
RATES = {"Partner": 950, "Senior Associate": 720, "Associate": 540, "Paralegal": 260}


def build(ctx: Ctx) -> WorldSpec:
    rng = ctx.rng
    firm = rng.choice(FIRMS)
    client = rng.choice(CLIENTS)
    vendor = rng.choice(VENDORS)
    state = rng.choice(STATES)
    firm_dom = org_domain(firm.replace(" LLP", ""), ".law")
    client_dom = org_domain(client.split()[0] + " " + client.split()[1])
    vendor_dom = org_domain(vendor.split()[0], "counsel.com")
    team = ctx.people(firm_dom, "Partner", "Senior Associate", "Associate", "Paralegal")
    partner, senior, assoc, para = team
    gc = ctx.person(client_dom, "General Counsel")
    opp = ctx.person(vendor_dom, "Outside counsel")

    notice_days = rng.choice([30, 45, 60, 90])
    term_years = rng.choice([2, 3, 4, 5])
    monthly_fee = rng.choice([85_000, 120_000, 150_000, 210_000])
    cap_months = rng.choice([6, 12, 18])
    cap = monthly_fee * cap_months
    conf_years = rng.choice([3, 5, 7])
    effective = ctx.day(-120)

    msa_clauses = [
        ("1. Definitions", '"Services" means the managed IT services described in Schedule A. '
                           '"Fees" means the monthly fees set out in clause 4.'),
        ("2. Services", f"{vendor} (the Provider) shall provide the Services to {client} (the "
                        "Customer) in accordance with the service levels in Schedule B."),
        ("3. Term", f"This Agreement commences on {effective:%d %B %Y} and continues for an "
                    f"initial term of {term_years} years, renewing annually unless terminated."),
        ("4. Fees", f"The Customer shall pay a monthly fee of ${monthly_fee:,} within 30 days "
                    "of invoice."),
        ("5. Limitation of liability", f"Each party's aggregate liability under this Agreement "
                                       f"shall not exceed the Fees paid in the {cap_months} "
                                       f"months preceding the claim (${cap:,} at current fees), "
                                       "except for breach of confidentiality."),
        ("6. Termination for convenience", f"Either party may terminate this Agreement for "
                                           f"convenience on {notice_days} days' written notice."),
        ("7. Confidentiality", f"Obligations of confidentiality survive for {conf_years} years "
                               "after termination."),
        ("8. Governing law", f"This Agreement is governed by the laws of the State of {state}."),
    ]  # fmt: skip
    msa_blocks: list[F.Block] = [
        ("title", "Master Services Agreement"),
        ("p", f"between {client} and {vendor}, dated {effective:%d %B %Y}."),
    ]
    for heading, text in msa_clauses:
        msa_blocks += [("h1", heading), ("p", text)]
    msa = F.docx_bytes(msa_blocks, title="Master Services Agreement", author=senior.name)

    research_blocks: list[F.Block] = [
        ("title", "Case law summary: limitation of liability and termination"),
        ("p", f"Prepared by {assoc.name} for {partner.name}. Fictional authorities for training "
              "use only."),
    ]  # fmt: skip
    for name, cite, holding in CASES:
        research_blocks += [("h1", f"{name}, {cite}"), ("p", holding)]
    research_blocks += [
        ("h1", "Application"),
        ("p", f"Under {CASES[0][0]}, the {cap_months}-month fee cap in clause 5 of the {vendor} "
              "MSA is likely enforceable, subject to the gross-negligence exception."),
    ]  # fmt: skip
    research = F.pdf_bytes(research_blocks, title="Case law summary", author=assoc.name)

    # --- billing (formulas) -----------------------------------------------------------
    keepers = [(partner, "Partner"), (senior, "Senior Associate"), (assoc, "Associate"),
               (para, "Paralegal")]  # fmt: skip
    tasks_desc = [
        "Review MSA", "Research liability caps", "Draft client update",
        "Call with opposing counsel", "Prepare redline", "Organise closing binder",
    ]  # fmt: skip
    entries = []
    for i in range(10):
        person, role = keepers[i % 4] if i < 8 else keepers[rng.randrange(4)]
        hours = rng.choice([0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0])
        entries.append((ctx.day(-30 + 2 * i), person, role, rng.choice(tasks_desc), hours))
    bill_rows: list[list] = [["Date", "Timekeeper", "Role", "Description", "Hours", "Rate",
                              "Amount"]]  # fmt: skip
    for r, (d, person, role, desc, hours) in enumerate(entries, start=2):
        bill_rows.append([d.isoformat(), person.name, role, desc, hours, RATES[role],
                          f"=E{r}*F{r}"])  # fmt: skip
    last = len(entries) + 1
    bill_rows.append(["Total", None, None, None, f"=SUM(E2:E{last})", None,
                      f"=SUM(G2:G{last})"])  # fmt: skip
    total_fees = sum(h * RATES[role] for _, _, role, _, h in entries)
    total_hours = sum(h for *_, h in entries)
    partner_hours = sum(h for _, p, _, _, h in entries if p is partner)
    summary_rows: list[list] = [["Timekeeper", "Hours", "Fees"]]
    for i, (person, _) in enumerate(keepers, start=2):
        summary_rows.append([person.name, f"=SUMIF(Entries!B2:B{last},A{i},Entries!E2:E{last})",
                             f"=SUMIF(Entries!B2:B{last},A{i},Entries!G2:G{last})"])  # fmt: skip
    billing = F.xlsx_bytes(
        [
            F.Sheet(
                "Entries", bill_rows, {"A": 12, "B": 20, "C": 18, "D": 30, "G": 12}, {"G": "#,##0"}
            ),  # fmt: skip
            F.Sheet("By timekeeper", summary_rows, {"A": 20, "B": 10, "C": 12}),
        ],
        title=f"{client} billing",
        author=para.name,
    )

    deck = F.pptx_bytes(
        [
            F.Slide(f"{client}: MSA review", subtitle=f"{firm} | privileged and confidential"),
            F.Slide(
                "Key terms",
                [
                    f"Initial term: {term_years} years",
                    f"Termination for convenience: {notice_days} days' notice",
                    f"Liability cap: {cap_months} months of fees",
                    f"Governing law: {state}",
                ],
            ),  # fmt: skip
            F.Slide(
                "Recommendations",
                [
                    "Seek a data-breach carve-out from the cap",
                    "Resist any shortening of the notice period",
                ],
            ),  # fmt: skip
        ],
        title="Client update",
        author=partner.name,
    )
    matters = F.csv_bytes(
        [["matter_id", "client", "matter", "responsible_partner", "status"],
         [f"M-{ctx.hex('matter', 1, n=6).upper()}", client, f"MSA with {vendor}", partner.name,
          "open"],
         [f"M-{ctx.hex('matter', 2, n=6).upper()}", client, "Employment policy refresh",
          partner.name, "closed"]]
    )  # fmt: skip
    intake = (
        f"# Matter intake: {client} / {vendor} MSA\n\n"
        f"Responsible partner: {partner.name}\n\n"
        f"Client contact: {gc.name} ({gc.title})\n\n"
        "Scope: review the executed MSA, advise on the liability cap and exit rights, respond to "
        "the vendor's amendment proposals.\n"
    ).encode()
    fs = {
        "Contracts/Master_Services_Agreement.docx": msa,
        "Research/Case_Law_Summary.pdf": research,
        "Billing/Billing_Q3.xlsx": billing,
        "Client/Client_Update.pptx": deck,
        "Matters/matters.csv": matters,
        "Matters/intake.md": intake,
    }

    mid = lambda k: ctx.message_id(k, firm_dom)  # noqa: E731
    a1, a2, a3 = mid("amend"), mid("amend-re"), mid("amend-re2")
    b1, b2 = mid("bill"), mid("bill-re")
    mails = [
        F.Mail(a1, opp.pair, [partner.pair], "MSA - proposed amendment",
               ctx.at(-2, 10),
               f"Dear {partner.first},\n\nOur client {vendor} would like to discuss amendments "
               "to the termination and liability clauses. A draft will follow.\n\n" + opp.name),
        F.Mail(a2, partner.pair, [opp.pair], "Re: MSA - proposed amendment", ctx.at(-2, 14),
               "Thank you. We will review with our client once we have the draft.",
               in_reply_to=a1, references=[a1], cc=[senior.pair]),
        F.Mail(a3, gc.pair, [partner.pair], "Re: MSA - proposed amendment", ctx.at(-1, 9),
               f"{partner.first}, please make sure we keep at least our current notice period.",
               in_reply_to=a2, references=[a1, a2]),
        F.Mail(b1, gc.pair, [partner.pair], "Q3 invoice", ctx.at(-1, 11),
               "Could you send a breakdown of Q3 fees by timekeeper?"),
        F.Mail(b2, partner.pair, [gc.pair], "Re: Q3 invoice", ctx.at(-1, 13),
               "Of course - our billing team will send it over.", in_reply_to=b1,
               references=[b1], cc=[para.pair]),
    ]  # fmt: skip
    events = [
        F.Event(ctx.hex("cal", "neg"), "MSA negotiation call", ctx.at(3, 15), ctx.at(3, 16),
                "Dial-in", [partner.pair, senior.pair, opp.pair], partner.pair),
        F.Event(ctx.hex("cal", "client"), f"{client} update", ctx.at(5, 10), ctx.at(5, 11),
                f"{firm} offices, Conference Room B", [partner.pair, gc.pair], partner.pair),
    ]  # fmt: skip
    space = F.ChatSpace(
        f"space_{ctx.hex('space', 'matter', n=12)}",
        f"{client.split()[0]} MSA matter",
        [p.pair for p in team],
        [
            F.ChatMessage(ctx.hex("chat", 1, n=16), partner.pair, ctx.at(-2, 15),
                          "Vendor wants to reopen termination and liability. Prep a redline.",
                          "t1"),
            F.ChatMessage(ctx.hex("chat", 2, n=16), senior.pair, ctx.at(-2, 15, 30),
                          "Will do once their draft arrives.", "t1",
                          [F.reaction("\N{THUMBS UP SIGN}", partner.email)]),
        ],
    )  # fmt: skip
    users = {f"user_{ctx.hex('user', p.email, n=12)}": p.pair for p in team}
    files = {f"filesystem/{k}": v for k, v in fs.items()} | {
        ".apps_data/mail/inbox.mbox": F.mbox_bytes(mails),
        ".apps_data/calendar/matter.ics": F.ics_bytes(events, calendar_name=client),
        **{f".apps_data/chat/{k}": v for k, v in F.chat_files([space], users).items()},
    }

    tasks: list[TaskSpec] = []
    tasks.append(
        TaskSpec(
            key="notice-period",
            task_name="MSA termination notice period",
            prompt="Under the executed Master Services Agreement, how much written notice is "
            "required to terminate for convenience?",
            rubric=[
                crit(
                    1,
                    f"States {notice_days} days' written notice",
                    check("exact", value=f"{notice_days} days"),
                )
            ],  # fmt: skip
            gold_response=f"Clause 6 requires {notice_days} days' written notice "
            f"({notice_days} days) to terminate for convenience.",
            expected_output=None,
        )
    )
    tasks.append(
        TaskSpec(
            key="billing-total",
            task_name="Q3 fees and partner hours",
            prompt=(
                f"{gc.name} asked for the Q3 fee total. Using Billing/Billing_Q3.xlsx, what is "
                f"the total amount billed in USD, and how many hours did {partner.name} record?"
            ),
            rubric=[
                number_crit(
                    1,
                    f"States total fees of ${total_fees:,.0f}",
                    value=float(total_fees),
                    tolerance=1.0,
                ),
                number_crit(
                    2,
                    f"States {partner.name} recorded {partner_hours:g} hours",
                    value=float(partner_hours),
                    tolerance=0.01,
                ),
                crit(3, f"Total hours of {total_hours:g} are consistent with the workbook"),
            ],  # fmt: skip
            gold_response=(
                f"Total Q3 fees are USD {total_fees:.0f} over {total_hours:g} hours; "
                f"{partner.name} recorded {partner_hours:g} hours."
            ),
        )
    )
    memo = F.docx_bytes(
        [
            ("title", "Memorandum: limitation of liability"),
            ("p", f"To: {gc.name}. From: {partner.name}, {firm}."),
            ("h1", "Question"),
            ("p", f"Is the cap in clause 5 of the MSA with {vendor} enforceable?"),
            ("h1", "Answer"),
            ("p", f"Yes. The cap equals {cap_months} months of fees (${cap:,}). Under "
                  f"{CASES[0][0]} a fee-based cap is enforceable between sophisticated parties, "
                  "except for gross negligence or wilful misconduct."),
            ("p", f"Under {CASES[1][0]} a data-breach carve-out must be express; the MSA has "
                  "none, so we recommend negotiating one."),
        ],
        title="Liability cap memo",
        author=partner.name,
    )  # fmt: skip
    tasks.append(
        TaskSpec(
            key="liability-memo",
            task_name="Memo on the MSA liability cap",
            prompt=(
                "Draft a client memo analysing whether the limitation of liability in the MSA is "
                "enforceable, using the firm's case law summary. State the cap amount and "
                "recommend next steps. Save it as outputs/liability_cap_memo.docx."
            ),
            rubric=[
                crit(
                    1,
                    "Creates outputs/liability_cap_memo.docx",
                    check("file_exists", path="outputs/liability_cap_memo.docx"),
                ),
                crit(
                    2,
                    f"Cites {CASES[0][0]} as the controlling authority",
                    check(
                        "file_contains", path="outputs/liability_cap_memo.docx", value=CASES[0][0]
                    ),
                ),
                crit(3, f"States the cap as {cap_months} months of fees (${cap:,})"),
                crit(4, "Notes the gross negligence / wilful misconduct exception"),
                crit(5, "Recommends negotiating an express data-breach carve-out"),
            ],  # fmt: skip
            gold_response="Saved the memo to outputs/liability_cap_memo.docx.",
            gold_response_type="file",
            expected_output="make_new_doc",
            gold_files={"outputs/liability_cap_memo.docx": memo},
        )
    )
    new_notice = rng.choice([d for d in (10, 15, 20) if d < notice_days])
    new_cap_months = rng.choice([3, 4])
    new_cap = monthly_fee * new_cap_months
    amendment = F.docx_bytes(
        [
            ("title", "First Amendment to Master Services Agreement"),
            ("p", f"Proposed by {vendor}. Draft for discussion."),
            ("h1", "Amended clause 5"),
            ("p", f"Each party's aggregate liability shall not exceed the Fees paid in the "
                  f"{new_cap_months} months preceding the claim."),
            ("h1", "Amended clause 6"),
            ("p", f"Either party may terminate for convenience on {new_notice} days' written "
                  "notice."),
        ],
        title="Proposed amendment",
        author=opp.name,
    )  # fmt: skip
    tasks.append(
        TaskSpec(
            key="amendment-review",
            task_name="Review the vendor's proposed amendment",
            prompt=(
                f"{vendor}'s counsel sent a proposed amendment (inputs/proposed_amendment.docx). "
                "Compare it with the executed MSA: what changes to the termination notice period "
                "and the liability cap (in dollars at current fees), and does it meet the "
                "client's instruction in the mail thread?"
            ),
            rubric=[
                crit(
                    1,
                    f"Identifies the notice period cut from {notice_days} to {new_notice} days",
                    check("exact", value=f"{new_notice} days"),
                ),
                number_crit(
                    2,
                    f"States the new cap of ${new_cap:,} ({new_cap_months} months of fees)",
                    value=float(new_cap),
                    tolerance=1.0,
                ),
                crit(3, f"States the current cap of ${cap:,}"),
                crit(
                    4,
                    "Concludes the amendment breaches the client's instruction to keep the "
                    "current notice period",
                ),
            ],  # fmt: skip
            gold_response=(
                f"The amendment cuts the termination notice period from {notice_days} days to "
                f"{new_notice} days and the liability cap from {cap_months} to {new_cap_months} "
                f"months of fees, i.e. from USD {cap} to USD {new_cap}. This breaches "
                f"{gc.name}'s instruction to keep at least the current notice period."
            ),
            input_files={"filesystem/inputs/proposed_amendment.docx": amendment},
            input_files_as_string=True,
        )
    )
    return WorldSpec(
        domain=DOMAIN,
        short_name=slugify(firm.replace(" LLP", "")),
        description=(
            f"{firm} advising {client} on its master services agreement with {vendor}: "
            "contract, case-law research, billing, client deck, mail, chat and calendar."
        ),
        apps=["files", "docs", "sheets", "slides", "pdf", "mail", "chat", "calendar"],
        files=files,
        tasks=tasks,
    )
