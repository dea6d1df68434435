extension ReportHTML {
    /// System fonts only: the page must not fetch anything.
    static let style = """
        body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2328;background:#f6f8fa;margin:0}
        main{max-width:980px;margin:0 auto;padding:16px 20px 40px}
        h2{font-size:17px;margin:28px 0 10px}
        .banner{border-radius:8px;padding:12px 18px;color:#fff}
        .banner.pass{background:#1a7f37}.banner.fail{background:#cf222e}
        .banner h1{margin:0;font-size:28px;letter-spacing:.05em}.banner p{margin:4px 0}
        .banner code{background:rgba(255,255,255,.18);padding:1px 5px;border-radius:4px;word-break:break-all}
        table{border-collapse:collapse;background:#fff;margin:0 0 14px;font-variant-numeric:tabular-nums}
        caption{text-align:left;font-weight:600;padding:4px 0}
        th,td{border:1px solid #d0d7de;padding:3px 9px;text-align:left;vertical-align:top}
        thead th{background:#eef1f4}tbody th{font-weight:normal;color:#57606a}
        td.num,th.num{text-align:right}td.ok{color:#1a7f37;font-weight:600}td.bad{color:#cf222e;font-weight:700}
        td.detail{white-space:pre-wrap;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
        .checks,.events{width:100%}
        .summary{display:flex;flex-wrap:wrap;gap:0 18px;align-items:flex-start}
        figure{margin:0 0 18px;background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:8px 10px}
        figcaption{font-weight:600}
        svg.chart{width:100%;height:auto;display:block}
        svg .grid{stroke:#e5e7eb}svg .axis{stroke:#57606a}
        svg .tick,svg .axis-title{font-size:11px;fill:#57606a}
        svg .empty{font-size:14px;fill:#8c959f}
        svg path{stroke-width:1.6;stroke-linejoin:round}svg .marker{stroke-width:1.2;opacity:.8}
        .legend{list-style:none;margin:4px 0 0;padding:0;display:flex;flex-wrap:wrap;gap:4px 16px;font-size:12.5px}
        .legend .line{display:inline-block;width:18px;border-top:2px solid;margin-right:5px;vertical-align:middle}
        .legend .mark{display:inline-block;height:12px;border-left:2px solid;margin-right:6px;vertical-align:middle}
        .swatch{display:inline-block;width:9px;height:9px;border-radius:2px;margin-right:6px}
        .note{color:#57606a}
        """
}
