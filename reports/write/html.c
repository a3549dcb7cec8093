/* The HTML page around a report: escaping, head with the inline CSS, end.
 * See svg.h. */
#include "reports/write/svg.h"

#include <string.h>

#include "reports/write/utf8.h"

int ca_html_escape_n(FILE *f, const char *str, size_t n)
{
    if (!f)
        return -1;
    if (!str)
        return 0;
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ca_utf8_decode(s + i, n - i, &cp);
        const char *rep = NULL;
        switch (cp) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default:
            if ((k == 1 && s[i] >= 0x80) || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') ||
                cp == 0xFFFE || cp == 0xFFFF)
                rep = "\xEF\xBF\xBD";   /* U+FFFD: XML allows no escape for these */
        }
        if (rep) {
            if (run)
                fwrite(s + i - run, 1, run, f);
            run = 0;
            fputs(rep, f);
        } else {
            run += k;
        }
        i += k;
    }
    if (run)
        fwrite(s + n - run, 1, run, f);
    return ferror(f) ? -1 : 0;
}

int ca_html_escape(FILE *f, const char *s)
{
    return ca_html_escape_n(f, s, s ? strlen(s) : 0);
}

int ca_html_begin(FILE *f, const char *title)
{
    if (!f)
        return -1;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    ca_html_escape(f, title ? title : "cudalloc report");
    fputs("</title>\n<style>\n"
          "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1100px}\n"
          "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\n"
          "table{border-collapse:collapse;font-size:0.9em}\n"
          "th,td{border:1px solid #ccc;padding:0.25em 0.5em;text-align:left;vertical-align:top}\n"
          "td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
          "pre{font-size:0.85em;white-space:pre-wrap}\n"
          "svg{display:block;margin:0.5em 0}\n"
          ".verdict{padding:0.6em 0.9em;border-left:5px solid #888;background:#f4f4f4}\n"
          ".verdict.bad{border-color:#d62728;background:#fcf0f0}.verdict.good{border-color:#2ca02c;background:#eff8ef}\n"
          ".finding{border:1px solid #ccc;border-radius:4px;padding:0.1em 0.9em 0.6em;margin:0.8em 0}\n"
          ".finding h3{font-size:1.05em}.advice{background:#fff8e0;padding:0.4em 0.6em}\n"
          ".note{color:#555;font-size:0.85em;max-width:960px}.chart{position:relative}\n"
          ".hover-tip{position:absolute;z-index:1;margin:0;padding:0.4em 0.6em;background:#fff;border:1px solid #888;"
          "box-shadow:0 1px 4px rgba(0,0,0,0.25);pointer-events:none;font-size:0.8em;max-width:640px}\n"
          "</style>\n</head>\n<body>\n",
          f);
    return ferror(f) ? -1 : 0;
}

int ca_html_end(FILE *f)
{
    if (!f)
        return -1;
    fputs("</body>\n</html>\n", f);
    return ferror(f) ? -1 : 0;
}
