#!/usr/bin/env python3
"""Checks every relative link of a built MkDocs site: the file it names
exists and, when it carries a #fragment, that page has an element with that
id. (mkdocs 1.4's --strict checks that linked pages exist, not anchors.)

    tests/docs/check_links.py SITE_DIR
"""

import html.parser
import os
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag in ("a", "link") and a.get("href"):
            self.links.append(a["href"])
        if a.get("src"):
            self.links.append(a["src"])


def parse(path):
    p = Page()
    with open(path, encoding="utf-8", errors="replace") as f:
        p.feed(f.read())
    return p


def main():
    site = os.path.abspath(sys.argv[1])
    pages = {}
    for root, _, files in os.walk(site):
        for f in files:
            if f.endswith(".html"):
                path = os.path.join(root, f)
                pages[path] = parse(path)
    errors = []
    checked = 0
    for path, page in sorted(pages.items()):
        if os.path.relpath(path, site) == "404.html":
            continue  # served for any missing path: its links are site-absolute
        for link in page.links:
            u = urllib.parse.urlsplit(link)
            if u.scheme or u.netloc or link.startswith("//"):
                continue  # external (the theme's CDN scripts, http links)
            if u.path:
                target = os.path.normpath(
                    os.path.join(os.path.dirname(path), urllib.parse.unquote(u.path)))
                if os.path.isdir(target):
                    target = os.path.join(target, "index.html")
            else:
                target = path
            checked += 1
            rel = os.path.relpath(path, site)
            if not target.startswith(site + os.sep) and target != site:
                errors.append("%s: %s leaves the site" % (rel, link))
                continue
            if not os.path.exists(target):
                errors.append("%s: %s: no such file" % (rel, link))
                continue
            frag = urllib.parse.unquote(u.fragment)
            if frag and target.endswith(".html"):
                ids = pages[target].ids if target in pages else parse(target).ids
                if frag not in ids:
                    errors.append("%s: %s: no anchor #%s in %s"
                                  % (rel, link, frag, os.path.relpath(target, site)))
    for e in errors:
        print("check_links: " + e)
    if errors:
        print("check_links: FAIL: %d broken links of %d" % (len(errors), checked))
        return 1
    print("check_links: %d relative links in %d pages resolve" % (checked, len(pages)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
