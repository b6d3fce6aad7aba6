<%@ page trimDirectiveWhitespaces="true" %><%
  // A streamed response of ?size= bytes in ?piece= pieces, flushed as it goes (no Content-Length).
  response.setContentType("application/octet-stream");
  long size = Long.parseLong(request.getParameter("size"));
  int piece = request.getParameter("piece") == null ? 10000 : Integer.parseInt(request.getParameter("piece"));
  java.io.OutputStream o = response.getOutputStream();
  byte[] buffer = new byte[piece];
  long sent = 0;
  while (sent < size) {
    int n = (int) Math.min(piece, size - sent);
    for (int i = 0; i < n; ++i) buffer[i] = (byte) ((sent + i) % 251);
    o.write(buffer, 0, n);
    o.flush();
    sent += n;
    if (request.getParameter("pause") != null) Thread.sleep(Integer.parseInt(request.getParameter("pause")));
  }
%>