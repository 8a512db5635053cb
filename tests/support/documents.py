"""Small real documents for the media tests: a PDF written by hand (one text line a page), a docx
made by python-docx, and a docx and a PDF that are decompression bombs."""

from __future__ import annotations

import io
import zipfile
import zlib


def tiny_pdf(*pages: str) -> bytes:
    """A valid PDF whose page ``i`` shows the line ``pages[i]`` in Helvetica (ASCII text only)."""
    count = len(pages)
    page_ids = [4 + 2 * i for i in range(count)]
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % i for i in page_ids) + b"] /Count %d >>" % count,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for page_id, line in zip(page_ids, pages, strict=True):
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("ascii")
        stream = b"BT /F1 12 Tf 72 720 Td (" + escaped + b") Tj ET"
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 3 0 R >> >> >>" % (page_id + 1))
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return _pdf_file(objects)


def flate_bomb_pdf(unpacked_mb: int) -> bytes:
    """A one-page PDF whose content stream is compressed and inflates to ``unpacked_mb`` MB."""
    packer = zlib.compressobj(9)
    packed = [packer.compress(b"BT /F1 12 Tf 72 720 Td (hi) Tj ET\n")]
    packed += [packer.compress(b" " * 1_000_000) for _ in range(unpacked_mb)]
    stream = b"".join(packed) + packer.flush()
    return _pdf_file([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R /Resources << /Font << /F1 3 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ])


def _pdf_file(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (numbered from 1; the first is the catalog), with its cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.writelines(b"%010d 00000 n \n" % offset for offset in offsets)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def tiny_docx(*paragraphs: str) -> bytes:
    import docx

    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_bomb_docx(unpacked_mb: int) -> bytes:
    """A docx-shaped zip whose document part inflates to ``unpacked_mb`` MB of zeros (~1000:1)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            block = b"\x00" * 1_000_000
            for _ in range(unpacked_mb):
                part.write(block)
    return out.getvalue()
