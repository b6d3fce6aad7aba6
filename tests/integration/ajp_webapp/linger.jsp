<%@ page contentType="text/plain" session="false" trimDirectiveWhitespaces="true" %>
<%
  // The whole body (its Content-Length set) and a flush, then `ms` more of work before the
  // servlet returns and Tomcat writes END_RESPONSE.
  byte[] body = "complete before the end\n".getBytes("US-ASCII");
  response.setContentLength(body.length);
  response.getOutputStream().write(body);
  response.flushBuffer();
  Thread.sleep(Integer.parseInt(request.getParameter("ms")));
%>
