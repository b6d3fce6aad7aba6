"""Generated pages with the shape of real ones, for what depends on content (compression)."""


def wordpress_like_page(size=54 * 1024):
    """A home page shaped like WordPress's: head with styles and scripts, then posts (the
    compression benchmark and tests/integration/test_compression.py)."""
    head = ("<!DOCTYPE html>\n<html lang=\"en-US\">\n<head>\n<meta charset=\"UTF-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<title>My Blog &#8211; Just another WordPress site</title>\n"
            "<link rel='stylesheet' id='wp-block-library-css' href='/wp-includes/css/dist/"
            "block-library/style.min.css?ver=6.4.2' media='all' />\n")
    out = [head]
    n = 0
    total = len(head)
    while total < size:
        n += 1
        post = (f"<article id=\"post-{n}\" class=\"post-{n} post type-post status-publish "
                f"format-standard hentry category-uncategorized\">\n<header class=\"entry-header\">"
                f"<h2 class=\"entry-title\"><a href=\"http://example.com/2024/0{n % 9 + 1}/{n}/"
                f"post-{n}/\" rel=\"bookmark\">Post number {n}: thoughts on {n * 7 % 31} things"
                f"</a></h2></header>\n<div class=\"entry-content\"><p>Lorem ipsum dolor sit amet, "
                f"consectetur adipiscing elit {n * 13 % 97}. Sed do eiusmod tempor incididunt ut "
                f"labore et dolore magna aliqua {n}.</p>\n</div><footer class=\"entry-footer\">"
                f"<span class=\"posted-on\"><time datetime=\"2024-0{n % 9 + 1}-1{n % 10}\">"
                f"{n % 28 + 1} March 2024</time></span></footer></article>\n")
        out.append(post)
        total += len(post)
    return "".join(out).encode()[:size]
